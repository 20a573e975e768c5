package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
)

// lease serves the TTL lease ops. Grant and revoke are Raft
// entries; keepalive and time-to-live are answered by the leader, which
// alone times leases (internal/kv/lessor.go). Keys are attached to a lease by a
// PUT inside a transaction (txn.Op.Lease), so that compare-and-swap works
// with leases too.
func (s *Server) lease(ctx context.Context, req *wire.Request) wire.Response {
	if len(req.Key) != 0 || req.Flags != 0 {
		return badRequest(req.Op.String() + " carries a key or flags")
	}
	switch req.Op {
	case wire.OpLeaseGrant:
		return s.leaseGrant(ctx, req.Value)
	case wire.OpLeaseList:
		return s.leaseList(ctx, req.Value)
	}
	id, err := wire.DecodeLeaseID(req.Value)
	if err != nil {
		return badRequest(err.Error())
	}
	switch req.Op {
	case wire.OpLeaseRevoke:
		err := s.kv.Revoke(ctx, id)
		s.leaseRefused(err)
		return s.errResponse(err)
	case wire.OpLeaseKeepAlive:
		ttl, rev, err := s.kv.KeepAlive(ctx, id)
		if err != nil {
			return s.errResponse(err)
		}
		return wire.Response{Version: uint64(ttl), Value: wire.AppendLeaseRenewal(nil, rev)}
	}
	info, err := s.kv.TimeToLive(ctx, id)
	if err != nil {
		return s.errResponse(err)
	}
	w := wire.LeaseInfo{ID: info.ID, TTL: info.TTL, Remaining: info.Remaining, Keys: info.Keys}
	return wire.Response{Value: wire.AppendLeaseInfo(nil, &w)}
}

func (s *Server) leaseGrant(ctx context.Context, v []byte) wire.Response {
	var g wire.LeaseGrant
	if err := wire.DecodeLeaseGrant(v, &g); err != nil {
		return badRequest(err.Error())
	}
	id, err := s.kv.Grant(ctx, g.ID, g.TTL)
	if err != nil {
		s.leaseRefused(err)
		return s.errResponse(err)
	}
	return wire.Response{Version: id}
}

// leaseList serves one page of OpLeaseList: the ids after the request's,
// at most wire.MaxLeaseListIDs.
func (s *Server) leaseList(ctx context.Context, v []byte) wire.Response {
	if len(v) != 8 {
		return badRequest(fmt.Sprintf("lease list: a value of %d bytes (want 8)", len(v)))
	}
	ids, more, err := s.kv.Leases(ctx, binary.LittleEndian.Uint64(v), s.cfg.Knobs.LeaseListPage)
	if err != nil {
		return s.errResponse(err)
	}
	return wire.Response{Value: wire.AppendLeaseList(nil, &wire.LeaseList{IDs: ids, More: more})}
}

// leaseRefused logs a lease request refused by a limit (the raft node
// counts them, kvd_lease_refused_total), at most once per refusalLogEvery.
func (s *Server) leaseRefused(err error) {
	switch {
	case errors.Is(err, kv.ErrTooManyLeases), errors.Is(err, kv.ErrLeaseTTL), errors.Is(err, txn.ErrLeaseFull):
	default:
		return
	}
	if ok, held := s.refusalLog.Allow("lease_limit", time.Now()); ok {
		s.log.Warn("lease request refused by a limit", "err", err, "similar_not_logged", held)
	}
}
