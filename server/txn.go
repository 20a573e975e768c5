package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/mirror"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
)

// txn serves OpTxn: a transaction, compare-and-swap included. It is
// decoded and checked here (a bad one is StatusBadRequest, never
// proposed), admitted like PUTs (room reserved for every PUT of either
// branch, since which one runs is decided only at apply), and proposed as
// one Raft entry; its compares are evaluated when that entry is applied.
// A transaction whose compares fail is still a success of the RPC: the
// response says which branch ran.
func (s *Server) txn(ctx context.Context, req *wire.Request) wire.Response {
	if len(req.Key) != 0 || req.Flags != 0 {
		return badRequest("txn carries a key or flags")
	}
	t, err := txn.Decode(req.Value)
	if err != nil {
		return badRequest(err.Error())
	}
	release, term, err := s.admitTxn(&t)
	if err != nil {
		return s.errResponse(err)
	}
	defer release()
	adm := raft.Admission{Term: raft.NotAdmitted} // see put
	if term != 0 {
		ctx, adm = s.admitted(term)
	}
	resp, version, err := s.kv.Txn(ctx, &t, adm)
	switch {
	case errors.Is(err, txn.ErrReadTooLarge), errors.Is(err, txn.ErrInvalid):
		return badRequest(err.Error()) // applied nothing; retrying cannot help
	case errors.Is(err, txn.ErrLeaseNotFound), errors.Is(err, txn.ErrLeaseFull):
		s.leaseRefused(err)
		return s.errResponse(err) // applied nothing
	case err != nil:
		return s.errResponse(err)
	}
	return wire.Response{Version: version, Value: txn.AppendResponse(make([]byte, 0, 64), &resp)}
}

// admitTxn reserves, on the leader, room for every PUT of t (both
// branches), as put does for one; release ends the reservations. Either
// all are made or none. term is the term they were made in (0: not the
// leader, nothing reserved).
func (s *Server) admitTxn(t *txn.Txn) (release func(), term uint64, err error) {
	release = func() {}
	st := s.node.Status()
	switch {
	case !st.IsLeader:
		return release, 0, nil // the node answers "not leader"
	case !st.LeaderReady:
		return release, 0, errLeaderNotReady
	}
	var puts []mirror.Put
	for _, ops := range [2][]txn.Op{t.Then, t.Else} {
		for _, op := range ops {
			if op.Type == txn.Put {
				puts = append(puts, mirror.Put{Key: op.Key, ValueLen: len(op.Value)})
			}
		}
	}
	if release, err = s.mirror.ReserveAll(puts); err != nil {
		return release, 0, err
	}
	return release, st.Term, nil
}

// errLeaderNotReady refuses a write a leader cannot size yet: it has not
// applied its predecessors' last entries, which will commit before it
// (raft.Status.LeaderReady). Never proposed: the client retries.
var errLeaderNotReady = fmt.Errorf("%w: this leader is still applying the entries of earlier terms", raft.ErrProposalDropped)

// admitted is the context and admission a write admitted (its table room
// reserved) in term is proposed with: the server's own context, not the
// request's. The proposal enters the log only in that term
// (raft.Admission), and the call
// returns only with its outcome, whatever becomes of the request (the
// client gone, its deadline): the reservation must last until the write
// is applied or can no longer be, and a proposal handed to raft can still
// commit after its caller gave up. Every proposal's outcome comes within
// about an election timeout (raft completes it, refuses it, or fails it at
// a change of leader or term), or when the loop resumes from a freeze.
// The server's closing ends the wait too: Close waits for requests before
// it stops the node, and a restart rebuilds the region from what was
// committed anyway. (No per-request context is derived for it: that would
// register a child of a context every request shares, on the PUT path.)
func (s *Server) admitted(term uint64) (context.Context, raft.Admission) {
	return s.ctx, raft.Admission{Term: term}
}
