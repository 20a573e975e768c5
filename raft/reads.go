package raft

import (
	"encoding/binary"
	"math/rand/v2"
	"time"

	etcdraft "go.etcd.io/raft/v3"
)

// readTracker drives raft's ReadIndex for two clients: ReadIndex callers
// (batched: one raft request per loop iteration) and the leader's lease (one
// request per tick, stamped with its send time: see leaseGrants). It belongs
// to the loop.
type readTracker struct {
	// seq names this process's ReadIndex requests. It starts at random: a
	// follower's request is answered by the leader by name alone, and a
	// name reused after a restart could take the answer to the previous
	// run's request, an index from before writes the new read must see
	// (a stale read). Lease requests never leave the leader: its own seq.
	seq uint64

	batch   []*readRequest           // added this iteration
	pending map[uint64]*pendingReads // sent, awaiting a ReadState
	waiting []indexedReads           // have an index, awaiting apply

	lease leaseGrants
}

type pendingReads struct {
	reqs []*readRequest
	tick uint64
}

type indexedReads struct {
	index uint64
	reqs  []*readRequest
}

const (
	ctxRead  byte = 'R'
	ctxLease byte = 'L'
)

func newReadTracker() readTracker {
	return readTracker{seq: rand.Uint64(), pending: make(map[uint64]*pendingReads)}
}

func readCtx(kind byte, seq uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{kind}, seq)
}

func (t *readTracker) add(l *loop, r *readRequest) {
	if l.lead == 0 {
		r.done <- ErrNoLeader
		return
	}
	t.batch = append(t.batch, r)
}

// flush sends this iteration's ReadIndex calls as one raft request.
func (t *readTracker) flush(l *loop) {
	if len(t.batch) == 0 {
		return
	}
	t.seq++
	t.pending[t.seq] = &pendingReads{reqs: t.batch, tick: l.ticks}
	t.batch = nil
	l.rn.ReadIndex(readCtx(ctxRead, t.seq))
}

// onTick renews the lease on a leader and expires abandoned requests.
func (t *readTracker) onTick(l *loop, now time.Time) {
	t.lease.tick(l.leasing(), l.term, now, l.cfg.leaseDuration(), l.rn.ReadIndex)
	// raft drops a forwarded ReadIndex silently if the leader never answers;
	// give up after two election timeouts so callers are not left hanging.
	for seq, p := range t.pending {
		if l.ticks-p.tick > 2*uint64(l.cfg.ElectionTicks) {
			delete(t.pending, seq)
			finishReads(p.reqs, ErrTimeout)
		}
	}
}

// readStates takes raft's answers: each carries the commit index as of the
// request, confirmed by a quorum heartbeat round sent after it.
func (t *readTracker) readStates(l *loop, states []etcdraft.ReadState) {
	for _, rs := range states {
		ctx := rs.RequestCtx
		if len(ctx) != 9 {
			continue
		}
		seq := binary.LittleEndian.Uint64(ctx[1:])
		switch ctx[0] {
		case ctxRead:
			if p := t.pending[seq]; p != nil {
				delete(t.pending, seq)
				t.waiting = append(t.waiting, indexedReads{index: rs.Index, reqs: p.reqs})
			}
		case ctxLease:
			t.lease.answered(seq, rs.Index)
		}
	}
	t.applied(l)
}

// applied releases reads and lease grants whose index is now applied: a
// lease is only as good as the state the region shows, so it waits too.
func (t *readTracker) applied(l *loop) {
	keep := t.waiting[:0]
	for _, w := range t.waiting {
		if w.index <= l.applied {
			finishReads(w.reqs, nil)
		} else {
			keep = append(keep, w)
		}
	}
	clear(t.waiting[len(keep):])
	t.waiting = keep
	t.lease.grant(l.n.lease, l.leasing(), l.term, l.applied, l.cfg.leaseDuration())
}

// failPending fails reads that no leader has answered yet (the leader
// changed; the new one will not answer the old one's requests).
func (t *readTracker) failPending(err error) {
	for seq, p := range t.pending {
		delete(t.pending, seq)
		finishReads(p.reqs, err)
	}
}

func (t *readTracker) failAll(err error) {
	t.failPending(err)
	finishReads(t.batch, err)
	t.batch = nil
	for _, w := range t.waiting {
		finishReads(w.reqs, err)
	}
	t.waiting = nil
}

// dropLease forgets lease requests of a leadership that ended.
func (t *readTracker) dropLease() {
	t.lease.drop()
}

func finishReads(reqs []*readRequest, err error) {
	for _, r := range reqs {
		r.done <- err
	}
}
