package raft

import (
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// leaseGrants turns the leader's lease requests into lease extensions (see
// "The lease" in the package comment). The loop drives it: once a tick it
// sends a ReadIndex stamped with the tick's time (tick), it hands over
// raft's answers (answered) and, once their index is applied, the grants
// extend the lease (grant). It reads no clock: the time comes from the
// loop's clock as now (Knobs.Clock in tests).
type leaseGrants struct {
	seq   uint64
	sent  map[uint64]leaseRequest // sent, awaiting raft's ReadState
	waits []leaseGrant            // acknowledged, awaiting apply
}

type leaseRequest struct {
	sent time.Time // the leader's clock, read before the request
	term uint64
}

type leaseGrant struct {
	index uint64
	req   leaseRequest
}

// tick sends a lease request stamped now through readIndex if this node
// leads in term, and forgets requests an answer could no longer turn into
// a lease of length dur.
func (g *leaseGrants) tick(isLeader bool, term uint64, now time.Time, dur time.Duration, readIndex func(ctx []byte)) {
	if isLeader {
		if g.sent == nil {
			g.sent = make(map[uint64]leaseRequest)
		}
		g.seq++
		g.sent[g.seq] = leaseRequest{sent: now, term: term}
		readIndex(readCtx(ctxLease, g.seq))
	}
	for seq, r := range g.sent {
		if now.Sub(r.sent) > dur {
			delete(g.sent, seq)
		}
	}
}

// answered takes raft's ReadState for request seq: a quorum acknowledged a
// heartbeat sent after the request, and index was the commit index then.
func (g *leaseGrants) answered(seq, index uint64) {
	if r, ok := g.sent[seq]; ok {
		delete(g.sent, seq)
		g.waits = append(g.waits, leaseGrant{index: index, req: r})
	}
}

// grant extends ls with every answered request whose index is applied: a
// lease is only as good as the state the region shows, so it waits for the
// apply. Requests of another term or leadership are dropped.
func (g *leaseGrants) grant(ls *lease, isLeader bool, term, applied uint64, dur time.Duration) {
	keep := g.waits[:0]
	for _, w := range g.waits {
		switch {
		case !isLeader || w.req.term != term:
		case w.index <= applied:
			ls.extend(w.req.term, w.req.sent.Add(dur))
		default:
			keep = append(keep, w)
		}
	}
	clear(g.waits[len(keep):])
	g.waits = keep
}

// drop forgets the requests of a leadership that ended.
func (g *leaseGrants) drop() {
	clear(g.sent)
	g.waits = g.waits[:0]
}

// startClock starts the loop's tick schedule on its clock. A restarted
// node may have acknowledged a leader's heartbeat just before it went
// down, and that leader may be counting on it (the lease): it keeps the
// promise CheckQuorum made by ignoring vote requests for an election
// timeout (voteGrace).
func (l *loop) startClock(restarted bool) {
	now := l.now()
	l.nextTick = now.Add(l.cfg.TickInterval)
	if restarted {
		l.voteGrace = now.Add(l.cfg.electionTimeout())
	}
}

// inVoteGrace reports whether a message of type t is one a restarted node
// ignores still (see startClock).
func (l *loop) inVoteGrace(t pb.MessageType) bool {
	return (t == pb.MsgVote || t == pb.MsgPreVote) && l.now().Before(l.voteGrace)
}
