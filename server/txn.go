package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/table"
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
	var held []txn.Op
	unreserve := func() {
		s.tmu.Lock()
		for _, op := range held {
			s.tbl.Unreserve(op.Key, len(op.Value))
		}
		s.tmu.Unlock()
	}
	s.tmu.Lock()
branches:
	for _, ops := range [2][]txn.Op{t.Then, t.Else} {
		for _, op := range ops {
			if op.Type != txn.Put {
				continue
			}
			if err = s.reserveLocked(op.Key, len(op.Value)); err != nil {
				break branches
			}
			held = append(held, op)
		}
	}
	s.tmu.Unlock()
	if err != nil {
		unreserve()
		return release, 0, err
	}
	return unreserve, st.Term, nil
}

// roomForMissingLocked reports whether, with key's reservation made, the
// region still has room for the records of the keys it lacks, but key's
// own (this write replaces it), counted as record-area blocks and slots.
func (s *Server) roomForMissingLocked(key []byte) bool {
	bytes, keys := s.missingBytes, len(s.missing)
	if n, ok := s.missing[string(key)]; ok {
		bytes, keys = bytes-n, keys-1
	}
	st := s.tbl.Stats()
	return st.BytesUsed+st.BytesReserved+st.BytesLimbo+bytes <= st.BytesArea &&
		st.Keys+st.SlotsHeld+st.SlotsPending+keys <= st.KeyCapacity
}

// errRegionPartial refuses writes while a failed rebuild leaves the region
// partial; the repair loop retries the rebuild. Never proposed: the client
// retries.
var errRegionPartial = fmt.Errorf("%w: this leader's region is partial until its rebuild succeeds", raft.ErrProposalDropped)

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

// reserveLocked is admission for one write: the table reserves the room
// its apply will take (table.Reserve); when the region has none, the
// refusal is counted and fragmented free space compacted.
//
// The region must also keep room for what it lacks. A key applied but not
// placed (s.missing: a write a follower's region could not fit, kept when
// the follower became leader) is in no slot and no block, so Reserve does
// not see it; admitting into its room would commit more than a fresh
// region of this size holds, and the node could not restart. So while
// keys are missing their records' bytes and slots are counted too. And
// while a failed rebuild leaves the region partial, with keys not yet
// walked counted nowhere, nothing is admitted (the client retries).
func (s *Server) reserveLocked(key []byte, valueLen int) error {
	if s.rebuildFailed {
		return errRegionPartial
	}
	err := s.tbl.Reserve(key, valueLen)
	if err == nil && len(s.missing) > 0 && !s.roomForMissingLocked(key) {
		s.tbl.Unreserve(key, valueLen)
		err = fmt.Errorf("%w: the region keeps room for %d applied keys it lacks (%d bytes)",
			table.ErrNoSpace, len(s.missing), s.missingBytes)
	}
	if errors.Is(err, table.ErrNoSpace) {
		s.metrics.refused()
		s.compactLocked() // if free space is cut up, it is whole again a grace period from now
	}
	return err
}
