package raft

import (
	"context"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/txn"
)

// proposal is one request for the log, handed to the raft loop.
type proposal struct {
	reqID     uint64
	term      uint64         // set by the loop when proposed
	admitTerm uint64         // the term it was admitted in (WithAdmissionTerm), 0: any
	data      []byte         // a command, or
	cc        *pb.ConfChange // a membership change
	done      chan result    // buffered: the loop never blocks on it
}

type result struct {
	version uint64
	existed bool
	tx      txn.Response // a transaction's outcome
	err     error
}

func (p *proposal) finish(r result) { p.done <- r }

// readRequest is one ReadIndex call waiting for its barrier.
type readRequest struct{ done chan error }

// Put replicates key=value and returns once the write is committed and
// applied on this node; version is the entry's raft index. Only the leader
// accepts writes: elsewhere the error is a *NotLeaderError. Errors wrapping
// ErrLeaderChanged, or the context's, leave the outcome unknown.
func (n *Node) Put(ctx context.Context, key, value []byte) (version uint64, err error) {
	if err := checkKV(key, value); err != nil {
		return 0, err
	}
	r := n.proposeCommand(ctx, command{op: opPut, key: key, value: value})
	return r.version, r.err
}

// Delete replicates the removal of key, like Put. existed tells whether the
// key was present when the delete was applied; version is its raft index.
func (n *Node) Delete(ctx context.Context, key []byte) (existed bool, version uint64, err error) {
	if err := checkKV(key, nil); err != nil {
		return false, 0, err
	}
	r := n.proposeCommand(ctx, command{op: opDelete, key: key})
	return r.existed, r.version, r.err
}

func checkKV(key, value []byte) error {
	switch {
	case len(key) == 0 || len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes (1..%d)", ErrInvalidKey, len(key), MaxKeyLen)
	case len(value) > MaxValueLen:
		return fmt.Errorf("%w: %d bytes (max %d)", ErrValueTooLarge, len(value), MaxValueLen)
	}
	return nil
}

func (n *Node) proposeCommand(ctx context.Context, c command) result {
	if st := n.Status(); !st.IsLeader {
		return result{err: n.notLeader(st.LeaderID)}
	}
	c.proposer, c.reqID = n.id, n.nextReq.Add(1)
	p := &proposal{
		reqID:     c.reqID,
		admitTerm: admissionTerm(ctx),
		data:      appendCommand(make([]byte, 0, commandSize(c)), c),
		done:      make(chan result, 1),
	}
	return n.propose(ctx, p)
}

type admissionKey struct{}

// WithAdmissionTerm returns ctx carrying the term in which the caller
// admitted the write it proposes with it (Status.Term, read with
// Status.LeaderReady true): the write then enters the log only in that
// term, with the leader still ready, or fails with ErrProposalDropped
// (never in the log: safe to retry). See "Admission" in batch.go.
func WithAdmissionTerm(ctx context.Context, term uint64) context.Context {
	return context.WithValue(ctx, admissionKey{}, term)
}

// NotAdmitted, given to WithAdmissionTerm, marks a write its caller did not
// admit because the node was not the leader when it looked: should the
// node lead by the time the write reaches the loop, it is dropped
// (ErrProposalDropped) rather than proposed without the caller's checks.
const NotAdmitted = ^uint64(0)

func admissionTerm(ctx context.Context) uint64 {
	t, _ := ctx.Value(admissionKey{}).(uint64)
	return t
}

// propose hands p to the loop and waits for its outcome.
func (n *Node) propose(ctx context.Context, p *proposal) result {
	select {
	case n.propc <- p:
	case <-ctx.Done():
		return result{err: ctx.Err()}
	case <-n.donec:
		return result{err: n.stoppedErr()}
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
