package redisapi

import (
	"context"
	"sync"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/limits"
)

// Plain SETs (no option) of all of a Server's connections are committed
// in groups: while maxSetsInFlight groups are being committed, the next
// SETs wait, and the first one back from the cluster hands the waiting
// ones on as one kvd transaction of puts. 50 clients setting keys cost a
// few transactions per Raft round instead of 50 requests, each with its
// own proposal, apply and reply on the leader: most of a SET's cost is
// there, not in the PUT's bytes.
//
// A group is atomic and every SET in it was waiting for its reply while
// it committed, so the SETs are concurrent and applying them together, in
// any order, is a serial execution Redis could have chosen. Two SETs of
// one key in a group: the later one is the one put (the earlier value
// would be overwritten at the same instant, and no read can fall between
// them). A group that fails fails each of its SETs with the error a lone
// SET would have had (a write that may have been applied, too).

// maxSetsInFlight bounds the groups being committed at once. One: the
// next group forms while a Raft round commits this one. (Measured with
// redis-benchmark -c 50 through a gateway on 2 cores: 1 in flight took
// less CPU per SET and gave more SETs per second than 2 or 4, whose
// groups are smaller.)
const maxSetsInFlight = 1

// setOpOverhead is more than one put adds to a transaction's encoding
// besides its key and value (internal/txn's codec).
const setOpOverhead = 16

// setBatcher queues the plain SETs waiting for a group.
type setBatcher struct {
	mu       sync.Mutex
	inFlight int // groups being committed; a waiting SET is handed on by one
	waiting  []*pendingSet
}

// pendingSet is one SET waiting in a setBatcher. done receives its
// outcome, or run when it is to commit the next group itself.
type pendingSet struct {
	key, val []byte
	done     chan setOutcome
}

type setOutcome struct {
	err error
	run bool
}

// batchable reports whether a SET of key to val may join a group: one a
// kvd PUT would refuse (an empty or too long key, a too large value) is
// sent alone, so that the refusal is its own and fails no other SET.
func batchable(key, val []byte) bool {
	return len(key) > 0 && len(key) <= limits.MaxKey && len(val) <= limits.MaxValue
}

// runSetGrouped serves a plain SET of key to val, committed in a group
// with the other connections' (see above).
func (s *Server) runSetGrouped(ctx context.Context, key, val []byte) reply {
	if !batchable(key, val) {
		return setReply(s.c.Put(ctx, key, val))
	}
	p := &pendingSet{key: key, val: val, done: make(chan setOutcome, 1)}
	b := &s.sets
	b.mu.Lock()
	if b.inFlight >= maxSetsInFlight {
		b.waiting = append(b.waiting, p)
		b.mu.Unlock()
		if o := <-p.done; !o.run {
			return setReply(o.err)
		}
		b.mu.Lock() // handed on: the group in flight is now this one's
	} else {
		b.inFlight++
	}
	group := b.takeLocked(p)
	b.mu.Unlock()
	if s.cfg.Knobs.BeforeSetGroup != nil {
		s.cfg.Knobs.BeforeSetGroup(len(group))
	}

	err := s.commitSets(ctx, group)
	for _, q := range group[1:] {
		q.done <- setOutcome{err: err}
	}
	b.mu.Lock()
	if len(b.waiting) > 0 {
		next := b.waiting[0]
		b.waiting = b.waiting[1:]
		next.done <- setOutcome{run: true}
	} else {
		b.inFlight--
	}
	b.mu.Unlock()
	return setReply(err)
}

// takeLocked makes p's group: p, then the SETs that have waited longest,
// as many as one transaction holds (limits.MaxTxnOps operations,
// limits.MaxTxnBytes encoded).
func (b *setBatcher) takeLocked(p *pendingSet) []*pendingSet {
	group := []*pendingSet{p}
	size := setOpOverhead + len(p.key) + len(p.val)
	n := 0
	for _, q := range b.waiting {
		size += setOpOverhead + len(q.key) + len(q.val)
		if len(group) == limits.MaxTxnOps || size > limits.MaxTxnBytes {
			break
		}
		group = append(group, q)
		n++
	}
	b.waiting = b.waiting[n:]
	if len(b.waiting) == 0 {
		b.waiting = nil // let the taken ones' array go
	}
	return group
}

// commitSets commits a group: a lone SET as a PUT, more as one
// transaction that puts each key once, to the value of its last SET.
func (s *Server) commitSets(ctx context.Context, group []*pendingSet) error {
	if len(group) == 1 {
		return s.c.Put(ctx, group[0].key, group[0].val)
	}
	ops := make([]client.Op, 0, len(group))
	at := make(map[string]int, len(group))
	for _, p := range group {
		op := client.OpPut(p.key, p.val)
		if i, dup := at[string(p.key)]; dup {
			ops[i] = op
			continue
		}
		at[string(p.key)] = len(ops)
		ops = append(ops, op)
	}
	if len(ops) == 1 {
		last := group[len(group)-1]
		return s.c.Put(ctx, last.key, last.val)
	}
	_, err := s.c.Txn(ctx, client.Txn{Then: ops})
	return err
}

func setReply(err error) reply {
	if err != nil {
		return kvdError(err)
	}
	return ok
}
