package server

import (
	"context"
	"errors"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
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
	release, err := s.admitTxn(&t)
	if err != nil {
		return s.errResponse(err)
	}
	defer release()
	resp, version, err := s.node.Txn(ctx, &t)
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
// all are made or none.
func (s *Server) admitTxn(t *txn.Txn) (release func(), err error) {
	release = func() {}
	if !s.node.Status().IsLeader {
		return release, nil // the node answers "not leader"
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
		return release, err
	}
	return unreserve, nil
}

// reserveLocked is admission for one write: the table reserves the room
// its apply will take (table.Reserve); when the region has none, the
// refusal is counted and fragmented free space compacted.
func (s *Server) reserveLocked(key []byte, valueLen int) error {
	err := s.tbl.Reserve(key, valueLen)
	if errors.Is(err, table.ErrNoSpace) {
		s.metrics.refused()
		s.compactLocked() // if free space is cut up, it is whole again a grace period from now
	}
	return err
}
