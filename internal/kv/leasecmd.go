package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/raft"
)

// TTL lease limits. They are checked when entries are applied, so they
// are constants: every node must decide alike.
const (
	// MaxLeases is the most leases that may exist at once; a grant beyond
	// it fails with ErrTooManyLeases.
	MaxLeases = limits.MaxLeases
	// MaxLeaseKeys is the most keys one lease may hold; a PUT that would
	// attach more fails with ErrLeaseFull. It bounds the keys one revoke
	// (or expiry) deletes in its single entry.
	MaxLeaseKeys = limits.MaxLeaseKeys
	// MinLeaseTTL and MaxLeaseTTL bound a lease's TTL.
	MinLeaseTTL = limits.MinLeaseTTL
	MaxLeaseTTL = limits.MaxLeaseTTL
)

// A grant command's value is le64 id | le64 ttl (ns); a revoke's is
// le64 id | reason (1 byte: revokeByClient or revokeExpired). Both have no
// key.
const (
	revokeByClient byte = 0
	revokeExpired  byte = 1
)

func grantValue(id uint64, ttl time.Duration) []byte {
	b := binary.LittleEndian.AppendUint64(nil, id)
	return binary.LittleEndian.AppendUint64(b, uint64(ttl))
}

func parseGrant(v []byte) (id uint64, ttl time.Duration, err error) {
	if len(v) != 16 {
		return 0, 0, fmt.Errorf("%w: lease grant of %d bytes", errBadCommand, len(v))
	}
	return binary.LittleEndian.Uint64(v), time.Duration(binary.LittleEndian.Uint64(v[8:])), nil
}

func revokeValue(id uint64, reason byte) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, id), reason)
}

func parseRevoke(v []byte) (id uint64, reason byte, err error) {
	if len(v) != 9 {
		return 0, 0, fmt.Errorf("%w: lease revoke of %d bytes", errBadCommand, len(v))
	}
	return binary.LittleEndian.Uint64(v), v[8], nil
}

// Grant replicates a new lease of ttl (in [MinLeaseTTL, MaxLeaseTTL],
// else ErrLeaseTTL) and returns its id: id if non-zero (ErrLeaseExists if
// taken), else one drawn at random. The leader starts timing it when the
// grant is applied.
func (s *Store) Grant(ctx context.Context, id uint64, ttl time.Duration) (uint64, error) {
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return 0, fmt.Errorf("%w: %v not in [%v, %v]", ErrLeaseTTL, ttl, MinLeaseTTL, MaxLeaseTTL)
	}
	for id == 0 {
		id = rand.Uint64() >> 1 // positive as an int64, as etcd's ids are
	}
	_, err := s.node.Propose(ctx, raft.Admission{}, command{op: opLeaseGrant, value: grantValue(id, ttl)}.encoder())
	return id, err
}

// Revoke replicates the end of lease id: it and every key attached to it
// are deleted in one entry. ErrLeaseNotFound if there is no such lease.
func (s *Store) Revoke(ctx context.Context, id uint64) error {
	_, err := s.node.Propose(ctx, raft.Admission{}, command{op: opLeaseRevoke, value: revokeValue(id, revokeByClient)}.encoder())
	return err
}

// KeepAlive renews lease id on the leader: its deadline becomes now + TTL.
// It returns the TTL once a ReadIndex round begun after the renewal has
// confirmed this node still leads (see lessor.go for why that keeps a
// holder's view of the lease safe). rev is the store revision of the
// applied state the renewal was made on, read before it (etcd's header
// revision of a keep-alive): no revision it names has the lease revoked.
//
// One round serves as both of the keep-alive's barriers. The renewal goes
// first, on the applied state as it stands; the round that confirms the
// leadership then also applies everything committed before it, so the
// lease is checked again after it: a revoke committed before the
// keep-alive arrived (by an earlier leader, not yet applied here) ends it
// with ErrLeaseNotFound, as etcd's does, and renewing a lease about to be
// revoked lengthens nothing anyone is told of. Only a lease the applied
// state lacks costs a second round: it may be a grant committed but not yet
// applied here, so the renewal is retried once the state is current.
func (s *Store) KeepAlive(ctx context.Context, id uint64) (ttl time.Duration, rev uint64, err error) {
	if err := s.leaderHere(); err != nil {
		return 0, 0, err
	}
	rev = s.Revision()
	ttl, err = s.m.leases.renew(id, s.cfg.LeaseClock())
	if errors.Is(err, ErrLeaseNotFound) {
		if err := s.node.ReadIndex(ctx); err != nil {
			return 0, 0, err
		}
		rev = s.Revision()
		ttl, err = s.m.leases.renew(id, s.cfg.LeaseClock())
	}
	if err != nil {
		return 0, 0, s.leaseErr(id, err)
	}
	if s.cfg.Knobs.AfterRenew != nil {
		s.cfg.Knobs.AfterRenew(id)
	}
	if err := s.node.ReadIndex(ctx); err != nil {
		return 0, 0, err
	}
	if err := s.m.leases.live(id); err != nil {
		return 0, 0, s.leaseErr(id, err)
	}
	return ttl, rev, nil
}

// leaseErr is the error a lease request returns for the lessor's err.
func (s *Store) leaseErr(id uint64, err error) error {
	if errors.Is(err, raft.ErrNotLeader) {
		return s.notLeader(s.node.Status().LeaderID)
	}
	return fmt.Errorf("%w: %d", err, id)
}

// TimeToLive reports lease id as the leader sees it.
func (s *Store) TimeToLive(ctx context.Context, id uint64) (LeaseInfo, error) {
	if err := s.leaderHere(); err != nil {
		return LeaseInfo{}, err
	}
	if err := s.node.ReadIndex(ctx); err != nil {
		return LeaseInfo{}, err
	}
	info, err := s.m.leases.info(id, s.cfg.LeaseClock())
	if err != nil {
		return info, s.leaseErr(id, err)
	}
	return info, nil
}

// Leases lists, on the leader, up to max ids of the leases after id
// after (0: from the first), ascending, and whether more follow.
func (s *Store) Leases(ctx context.Context, after uint64, max int) ([]uint64, bool, error) {
	if err := s.leaderHere(); err != nil {
		return nil, false, err
	}
	if err := s.node.ReadIndex(ctx); err != nil { // the applied leases are current
		return nil, false, err
	}
	ids, more, err := s.m.leases.list(after, max)
	if errors.Is(err, raft.ErrNotLeader) {
		return nil, false, s.notLeader(s.node.Status().LeaderID)
	}
	return ids, more, err
}

func (s *Store) leaderHere() error {
	if st := s.node.Status(); !st.IsLeader {
		return s.notLeader(st.LeaderID)
	}
	return nil
}

func (s *Store) notLeader(lead uint64) error {
	return &raft.NotLeaderError{LeaderID: lead, LeaderAddr: s.node.ClientAddr(lead)}
}

// LeaseCount is how many leases this node has applied.
func (s *Store) LeaseCount() int { return s.m.leases.count() }
