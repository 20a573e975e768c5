package kv

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft"
)

// TTL leases: not the read lease of lease.go, which is the
// leader's right to serve one-sided reads. A TTL lease is a client's: keys
// attached to it are deleted when it expires or is revoked.
//
// The lease itself (id, TTL, its keys) is replicated state, applied by
// every node from the grant and revoke entries and kept in Pebble with the
// keys (internal/store/lease.go). Its deadline is not: only the leader keeps one,
// on its own clock (Config.LeaseClock), and when it passes the leader
// proposes the lease's revoke, which deletes its keys in that one entry.
//
// The holder's side. A holder that sent a keepalive at time s and had it
// answered counts its lease valid until s + TTL by its own clock. The
// lease never expires before that:
//
//   - the leader that answered renewed the deadline to r + TTL, where r
//     is when it handled the keepalive, after s; and it answered only
//     after a ReadIndex round that began after the renewal (so after s)
//     confirmed that a quorum still took it for leader;
//   - so every later leader was elected after s (a quorum had to vote for
//     it, and every quorum shares a node with the one that confirmed the
//     old leader after s), and a new leader starts every lease's clock at
//     its election (promote), at full TTL: its deadline is after s + TTL;
//   - a deposed leader's revoke proposed after that election cannot
//     commit (the quorum that elected the new leader rejects its term),
//     and one proposed before it was proposed at a deadline that the
//     holder's keepalives had not moved, so the holder's lease had
//     expired by then already;
//   - once the leader decides to expire a lease it refuses keepalives
//     for it (expiring), so no keepalive is answered for a lease whose
//     revoke is on its way;
//   - the round that confirmed the leader also applied everything
//     committed before it, and the lease is looked up again after it
//     (KeepAlive): a keepalive is never answered for a lease whose revoke
//     committed before the keepalive arrived, even one this leader had
//     not applied yet when it renewed.
//
// This assumes clock rates differ little (a leader's TTL spans about the
// holder's); time the holder spends between sending and the leader's
// renewal only lengthens the lease. A restart is a leader change: the
// deadline is kept only in memory, so a restarted cluster's leader starts
// every lease at full TTL. Leases therefore last longer than their TTL
// across elections, never shorter (etcd's rule).
//
// lessor holds the applied leases (mirrored from the apply path) and, on
// the leader, their deadlines. The raft loop and keepalive callers share it.
type lessor struct {
	mu     sync.Mutex
	leases map[uint64]*leaseState
	leader bool
}

type leaseState struct {
	ttl  time.Duration
	keys uint64
	// deadline is when the leader expires the lease (zero off the leader).
	deadline time.Time
	// expiring is when the leader last proposed the lease's revoke for
	// expiry (zero: not yet); keepalives are refused from then on.
	expiring time.Time
}

func newLessor() *lessor { return &lessor{leases: make(map[uint64]*leaseState)} }

// reset replaces the applied leases (at open, and after a snapshot
// install); a leader restarts their clocks at now.
func (ls *lessor) reset(leases []store.Lease, now time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.leases = make(map[uint64]*leaseState, len(leases))
	for _, l := range leases {
		st := &leaseState{ttl: time.Duration(l.TTL), keys: l.Keys}
		if ls.leader {
			st.deadline = now.Add(st.ttl)
		}
		ls.leases[l.ID] = st
	}
}

// granted records an applied grant.
func (ls *lessor) granted(id uint64, ttl time.Duration, now time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	st := &leaseState{ttl: ttl}
	if ls.leader {
		st.deadline = now.Add(ttl)
	}
	ls.leases[id] = st
}

// revoked records an applied revoke (or expiry).
func (ls *lessor) revoked(id uint64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.leases, id)
}

// setKeys records lease id's applied key count.
func (ls *lessor) setKeys(id, keys uint64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if st := ls.leases[id]; st != nil {
		st.keys = keys
	}
}

// count is how many leases are applied.
func (ls *lessor) count() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.leases)
}

// promote makes this node the leader's lessor: every lease's clock starts
// now, at its full TTL, whatever an earlier leader had left of it.
func (ls *lessor) promote(now time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.leader = true
	for _, st := range ls.leases {
		st.deadline, st.expiring = now.Add(st.ttl), time.Time{}
	}
}

// demote forgets the deadlines: only a leader keeps them.
func (ls *lessor) demote() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.leader = false
	for _, st := range ls.leases {
		st.deadline, st.expiring = time.Time{}, time.Time{}
	}
}

// renew is a keepalive on the leader: the lease's deadline becomes now +
// TTL. A lease the leader has begun to expire is not renewed.
func (ls *lessor) renew(id uint64, now time.Time) (time.Duration, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	st := ls.leases[id]
	switch {
	case !ls.leader:
		return 0, raft.ErrNotLeader
	case st == nil || !st.expiring.IsZero():
		return 0, ErrLeaseNotFound
	}
	st.deadline = now.Add(st.ttl)
	return st.ttl, nil
}

// live reports whether the leader still holds lease id, as renew would
// find it: neither revoked nor being expired.
func (ls *lessor) live(id uint64) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	st := ls.leases[id]
	switch {
	case !ls.leader:
		return raft.ErrNotLeader
	case st == nil || !st.expiring.IsZero():
		return ErrLeaseNotFound
	}
	return nil
}

// LeaseInfo is a lease as the leader sees it.
type LeaseInfo struct {
	ID        uint64
	TTL       time.Duration // as granted
	Remaining time.Duration // until the leader expires it (0: expiring)
	Keys      uint64        // keys attached
}

// info reports lease id on the leader.
func (ls *lessor) info(id uint64, now time.Time) (LeaseInfo, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	st := ls.leases[id]
	switch {
	case !ls.leader:
		return LeaseInfo{}, raft.ErrNotLeader
	case st == nil || !st.expiring.IsZero():
		return LeaseInfo{}, ErrLeaseNotFound
	}
	return LeaseInfo{ID: id, TTL: st.ttl, Remaining: max(st.deadline.Sub(now), 0), Keys: st.keys}, nil
}

// list returns, on the leader, up to max ids of the leases after id
// after, ascending, and whether more follow. Leases being expired are
// left out, as info leaves them out.
func (ls *lessor) list(after uint64, max int) (ids []uint64, more bool, err error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if !ls.leader {
		return nil, false, raft.ErrNotLeader
	}
	for id, st := range ls.leases {
		if id > after && st.expiring.IsZero() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if len(ids) > max {
		return ids[:max], true, nil
	}
	return ids, false, nil
}

// maxExpirePerTick bounds the revokes the leader proposes per tick, so an
// expiry storm is spread over ticks rather than stalling the raft loop.
const maxExpirePerTick = 64

// expired returns (in id order, at most maxExpirePerTick) the leases whose
// deadline has passed and whose revoke was not proposed within retry, and
// marks them expiring: the caller proposes their revokes. A revoke that
// is lost (dropped, or its leader deposed) is proposed again after retry.
func (ls *lessor) expired(now time.Time, retry time.Duration) []uint64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if !ls.leader {
		return nil
	}
	var ids []uint64
	for id, st := range ls.leases {
		due := !st.deadline.IsZero() && !now.Before(st.deadline)
		if due && (st.expiring.IsZero() || now.Sub(st.expiring) >= retry) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) > maxExpirePerTick {
		ids = ids[:maxExpirePerTick]
	}
	for _, id := range ids {
		ls.leases[id].expiring = now
	}
	return ids
}
