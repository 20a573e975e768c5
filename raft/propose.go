package raft

import (
	"context"

	pb "go.etcd.io/raft/v3/raftpb"
)

// proposal is one request for the log, handed to the raft loop.
type proposal struct {
	reqID     uint64
	term      uint64         // set by the loop when proposed
	admitTerm uint64         // the term it was admitted in (Admission), 0: any
	data      []byte         // a command, or
	cc        *pb.ConfChange // a membership change
	done      chan result    // buffered: the loop never blocks on it
}

type result struct {
	index uint64
	value any // the state machine's Outcome.Value
	err   error
}

func (p *proposal) finish(r result) { p.done <- r }

// readRequest is one ReadIndex call waiting for its barrier.
type readRequest struct{ done chan error }

// Propose replicates the command that encode makes and returns once its
// entry is committed and applied on this node, with the state machine's
// outcome. Only the leader accepts proposals: elsewhere the error is a
// *NotLeaderError. Errors wrapping ErrLeaderChanged, or the context's,
// leave the outcome unknown; ErrProposalDropped means the entry never
// entered the log (a stale adm among the reasons).
func (n *Node) Propose(ctx context.Context, adm Admission, encode Encode) (Proposed, error) {
	if st := n.Status(); !st.IsLeader {
		return Proposed{}, n.notLeader(st.LeaderID)
	}
	reqID := n.nextReq.Add(1)
	p := &proposal{
		reqID:     reqID,
		admitTerm: adm.Term,
		data:      encode(n.id, reqID),
		done:      make(chan result, 1),
	}
	r := n.propose(ctx, p)
	return Proposed{Index: r.index, Value: r.value}, r.err
}

// propose hands p to the loop and waits for its outcome.
func (n *Node) propose(ctx context.Context, p *proposal) result {
	select {
	case n.propc <- p: // room in the queue: no select over the others
	default:
		select {
		case n.propc <- p:
		case <-ctx.Done():
			return result{err: ctx.Err()}
		case <-n.donec:
			return result{err: n.stoppedErr()}
		}
	}
	select {
	case r := <-p.done:
		return r
	case <-ctx.Done():
		return result{err: ctx.Err()}
	case <-n.donec:
		return result{err: n.stoppedErr()}
	}
}

// ReadIndex is a linearizable read barrier: it returns once this node has
// applied everything committed before the call, as confirmed by the leader
// with a quorum round (on followers the request is forwarded, as raft does).
// Reads from Get after it see every write acknowledged before the call.
func (n *Node) ReadIndex(ctx context.Context) error {
	r := &readRequest{done: make(chan error, 1)}
	select {
	case n.readc <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return n.stoppedErr()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return n.stoppedErr()
	}
}
