package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/limits"
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
	resp, version, failed := s.runTxn(ctx, &t)
	if failed != nil {
		return *failed
	}
	return wire.Response{Version: version, Value: txn.AppendResponse(make([]byte, 0, 64), &resp)}
}

// runTxn admits and proposes a valid transaction, and returns its outcome
// or the response that says why it failed.
func (s *Server) runTxn(ctx context.Context, t *txn.Txn) (txn.Response, uint64, *wire.Response) {
	fail := func(r wire.Response) (txn.Response, uint64, *wire.Response) { return txn.Response{}, 0, &r }
	release, term, err := s.admitTxn(t)
	if err != nil {
		return fail(s.errResponse(err))
	}
	defer release()
	adm := raft.Admission{Term: raft.NotAdmitted} // see put
	if term != 0 {
		ctx, adm = s.admitted(term)
	}
	resp, version, err := s.kv.Txn(ctx, t, adm)
	switch {
	case errors.Is(err, txn.ErrReadTooLarge), errors.Is(err, txn.ErrInvalid):
		return fail(badRequest(err.Error())) // applied nothing; retrying cannot help
	case errors.Is(err, txn.ErrLeaseNotFound), errors.Is(err, txn.ErrLeaseFull):
		s.leaseRefused(err)
		return fail(s.errResponse(err)) // applied nothing
	case err != nil:
		return fail(s.errResponse(err))
	}
	return resp, version, nil
}

// putIgnore serves a PUT with ignore_value or ignore_lease (wire flags):
// a transaction of that one put, preceded by a GET of the key if it asks
// for prev_kv, so that the key's existence is checked where it is
// applied, on every node alike (absent: StatusNotFound, nothing applied).
func (s *Server) putIgnore(ctx context.Context, req *wire.Request) wire.Response {
	put := txn.Op{Type: txn.Put, Key: req.Key, Value: req.Value,
		IgnoreValue: req.Flags&wire.PutIgnoreValue != 0, IgnoreLease: req.Flags&wire.PutIgnoreLease != 0}
	t := txn.Txn{Then: []txn.Op{put}}
	prevKV := req.Flags&wire.PutPrevKV != 0
	if prevKV {
		t.Then = []txn.Op{{Type: txn.Get, Key: req.Key}, put}
	}
	if err := t.Validate(); err != nil {
		return badRequest(err.Error())
	}
	resp, version, failed := s.runTxn(ctx, &t)
	if failed != nil {
		return *failed
	}
	out := wire.Response{Version: version}
	if prevKV {
		if g := resp.Results[0]; g.Found {
			out.Value = prevKVs(1, []kv.KV{{Key: req.Key, Value: g.Value, Meta: g.Meta}})
		} else {
			out.Value = prevKVs(0, nil)
		}
	}
	return out
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
	if release, err = s.mirror.ReserveAll(txnPuts(nil, t)); err != nil {
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

// txnPuts appends the PUTs of t's branches, nested transactions included,
// as table room to reserve. A PUT with IgnoreValue writes the value the
// key has when it is applied, which may have grown since: it reserves
// room for the largest.
func txnPuts(puts []mirror.Put, t *txn.Txn) []mirror.Put {
	for _, ops := range [2][]txn.Op{t.Then, t.Else} {
		for i := range ops {
			switch op := &ops[i]; op.Type {
			case txn.Put:
				n := len(op.Value)
				if op.IgnoreValue {
					n = limits.MaxValue
				}
				puts = append(puts, mirror.Put{Key: op.Key, ValueLen: n})
			case txn.Nested:
				puts = txnPuts(puts, op.Txn)
			}
		}
	}
	return puts
}
