package raft

import (
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Proposal batching.
//
// Puts and Deletes from every connection meet in one queue, Node.propc.
// The loop takes what is queued at each iteration (drain, up to maxDrain
// items) and proposes the commands it took, unless it holds them for a
// larger batch (below), as few raft messages as the bounds below allow,
// so that they enter the log together: one Ready
// appends them, one Pebble batch and one fsync make them durable, one
// append per follower replicates them, and, once committed, one Ready
// applies them and one StateMachine.Committed call publishes them. While
// the loop waits for an fsync, the next batch queues up behind it: the
// busier the node, the larger its batches, with no timer adding latency
// to a lone write.
//
// # Holding a batch
//
// Each batch has a fixed cost besides its commands': a Ready and a Pebble
// commit with an fsync on every node, an append per follower and its
// acknowledgement, and the wake-ups of the goroutines involved. A leader
// that proposed whatever was queued at every iteration would send a new
// batch while the previous one was still being replicated, so 64 writers
// (one write in flight each) would make batches of about 9 commands, and
// on a busy machine the fixed costs would be most of a PUT's CPU. So while a batch of the
// leader's is uncommitted (commit < appendedTo), commands queue for the
// next one, which goes out as soon as the commit advances: batches grow
// with the load and the number of them in flight stays at one or two, as
// in a group commit. A full batch (maxBatch commands, or MaxSizePerMsg
// bytes) goes at once, so large writes still pipeline; a write that finds
// nothing uncommitted goes at once, so holding adds no latency to a lone
// write and no timer to the loop. A held command waits at most for one
// commit round trip, which its own commit would have waited for anyway.
//
// Holding decides only when commands are proposed, never what the log
// holds or when an entry counts as committed. Held commands are the
// loop's like queued ones: a node that is no longer the leader proposes
// them at its next iteration, and raft refuses them (ErrProposalDropped:
// never in the log, safe to retry), as it refuses an admission of another
// term (dropStaleAdmissions); a stop or a storage failure fails them.
//
// A batch is bounded by maxBatch commands and by Config.MaxSizePerMsg
// bytes of command data (whichever is reached first closes it; a single
// larger command goes alone), so one raft message never exceeds what a
// follower's append may carry, and raft's MaxUncommittedBytes still
// refuses new batches once the uncommitted tail is full.
//
// Each proposal keeps its own outcome: the loop registers every command
// by its request id, and the apply completes each caller with its own
// entry's index (complete, in ready.go). If raft refuses a batch (not
// leader, uncommitted tail full), every command in it is refused and each
// caller is told; a caller that gave up (its context ended) leaves the
// others untouched.

// maxBatch bounds the commands proposed in one raft message.
const maxBatch = 1024

// Admission. A caller that sizes a write against this node's state before
// proposing it (the server reserves table room) needs that state to hold
// every write that will commit before it: so it admits only while the node
// is the leader and LeaderReady (every entry of earlier terms applied), and
// passes the term it admitted in (Admission). The loop proposes
// such a command only in that term: a node that lost leadership and won it
// again meanwhile may have entries of the terms between still to apply,
// which the admission did not count. Without this a new leader admitted
// writes before applying its predecessor's last ones, and a region full at
// the time could not hold them all (nor could any node's, at restart).

// leaderReady reports whether the node leads and has applied its term's
// first entry (and so every entry of earlier terms).
func (l *loop) leaderReady() bool { return l.isLeader && l.applied >= l.termStart }

// dropStaleAdmissions fails the batched commands admitted in another term,
// or while the leader was not ready, before they enter the log.
func (l *loop) dropStaleAdmissions() {
	keep := l.batch[:0]
	for _, p := range l.batch {
		if p.admitTerm == 0 || (p.admitTerm == l.term && l.leaderReady()) {
			keep = append(keep, p)
			continue
		}
		l.batchBytes -= len(p.data)
		l.n.metrics.failed.Inc()
		p.finish(result{err: fmt.Errorf("%w: admitted in term %d; the node is in term %d (leader: %v, ready: %v)",
			ErrProposalDropped, p.admitTerm, l.term, l.isLeader, l.leaderReady())})
	}
	clear(l.batch[len(keep):])
	l.batch = keep
}

// propose queues a command for the next batch, proposes a membership
// change at once, or fails p.
func (l *loop) propose(p *proposal) {
	if !l.isLeader {
		p.finish(result{err: l.n.notLeader(l.lead)})
		return
	}
	if p.cc == nil {
		if len(l.batch) > 0 && uint64(l.batchBytes+len(p.data)) > l.cfg.MaxSizePerMsg {
			l.flushProposals() // p would take the batch past its byte bound
		}
		l.batch = append(l.batch, p)
		l.batchBytes += len(p.data)
		if len(l.batch) >= maxBatch || uint64(l.batchBytes) >= l.cfg.MaxSizePerMsg {
			l.flushProposals()
		}
		return
	}
	err := l.checkConfChange(p.cc)
	if err == nil {
		if err = l.rn.ProposeConfChange(p.cc); err == nil {
			l.confProposed = true
		}
	}
	switch {
	case err != nil:
		p.finish(result{err: proposeErr(err)})
	default:
		p.term = l.term
		l.waiters[p.reqID] = p
	}
}

// batchHeld reports whether the queued commands wait for a larger batch:
// the node leads and an entry it appended is still uncommitted (propose
// flushes a full batch itself). See "Holding a batch".
func (l *loop) batchHeld() bool {
	return l.isLeader && l.commit < l.appendedTo
}

// maybeFlush proposes the queued commands unless they are held, and
// reports whether it proposed any.
func (l *loop) maybeFlush() bool {
	defer func() { l.n.metrics.proposalsHeld.Set(float64(len(l.batch))) }()
	if len(l.batch) == 0 || l.batchHeld() {
		return false
	}
	l.flushProposals()
	return true
}

// flushProposals proposes the queued commands as one raft message, so the
// leader appends them together and replicates them in one append per
// follower rather than one per command.
func (l *loop) flushProposals() {
	l.dropStaleAdmissions()
	if len(l.batch) == 0 {
		return
	}
	l.n.metrics.proposalBatch.Observe(float64(len(l.batch)))
	ents := make([]*pb.Entry, len(l.batch))
	for i, p := range l.batch {
		ents[i] = &pb.Entry{Data: p.data}
	}
	err := l.rn.Step(&pb.Message{Type: pb.MsgProp.Enum(), From: new(l.n.id), Entries: ents})
	for _, p := range l.batch {
		if err != nil {
			l.n.metrics.failed.Inc()
			p.finish(result{err: proposeErr(err)})
			continue
		}
		p.term = l.term
		l.waiters[p.reqID] = p
	}
	clear(l.batch)
	l.batch, l.batchBytes = l.batch[:0], 0
}

// proposeOwn queues a command of the state machine's own (a TTL lease's
// expiry): nobody waits on it, its outcome is the applied state.
func (l *loop) proposeOwn(encode Encode) {
	reqID := l.n.nextReq.Add(1)
	l.propose(&proposal{reqID: reqID, data: encode(l.n.id, reqID), done: make(chan result, 1)})
}
