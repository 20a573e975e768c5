package etcdapi

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/kvd-project/kvd/client"
)

// headerRefresh is how long the cluster id, member id and raft term that
// fill response headers are used before they are asked for again.
const headerRefresh = 5 * time.Second

// headerTimeout bounds one refresh.
const headerTimeout = 5 * time.Second

// touchHeader starts a refresh of the header's ids and term if they are
// older than headerRefresh and no refresh is under way. Once they are
// known it never blocks: the refresh runs beside the request (which uses
// what is known), so a request costs no extra RPC. Until then (New's
// refresh failed: the cluster had no leader yet, say) a request waits for a refresh,
// bounded by headerTimeout, rather than answer a cluster id of 0, which
// etcdctl prints (member add/remove, endpoint status).
func (s *Server) touchHeader() {
	now := time.Now().UnixNano()
	if s.clusterID.Load() == 0 && s.headerNext.Load() != 0 { // New's own refresh runs beside it
		s.refreshHeader()
		return
	}
	if now < s.headerNext.Load() || !s.headerBusy.CompareAndSwap(false, true) {
		return
	}
	s.headerNext.Store(now + int64(headerRefresh))
	go func() {
		defer s.headerBusy.Store(false)
		s.refreshHeader()
	}()
}

// refreshHeader asks a member for its status: the cluster id, its id and
// the raft term. The member id is the answering member's only where the
// Server runs on none (a gateway): a node's headers name the node.
// A failure keeps what was known.
func (s *Server) refreshHeader() {
	ctx, cancel := context.WithTimeout(context.Background(), headerTimeout)
	defer cancel()
	ms, err := s.c.Members(ctx)
	if err != nil {
		return
	}
	// The member this Server runs on, if known, answers first: its id
	// and term are the header's.
	slices.SortStableFunc(ms, func(a, b client.Member) int {
		return cmp.Compare(b2i(a.ID != s.cfg.MemberID), b2i(b.ID != s.cfg.MemberID))
	})
	for _, m := range ms {
		addr := m.ClientAddr
		if addr == "" {
			addr = m.Addr
		}
		st, err := s.c.Status(ctx, addr)
		if err != nil {
			continue
		}
		s.clusterID.Store(uint64(st.ClusterID))
		if s.cfg.MemberID == 0 {
			s.memberID.Store(st.ID)
		}
		s.term.Store(st.Term)
		return
	}
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
