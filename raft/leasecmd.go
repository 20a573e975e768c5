package raft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvd-project/kvd/internal/limits"
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

// The limits the apply path checks; tests lower them (every node of a
// test shares them, as every node of a cluster shares the constants).
var (
	maxLeases    = MaxLeases
	maxLeaseKeys = MaxLeaseKeys
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
func (n *Node) Grant(ctx context.Context, id uint64, ttl time.Duration) (uint64, error) {
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return 0, fmt.Errorf("%w: %v not in [%v, %v]", ErrLeaseTTL, ttl, MinLeaseTTL, MaxLeaseTTL)
	}
	for id == 0 {
		id = rand.Uint64() >> 1 // positive as an int64, as etcd's ids are
	}
	r := n.proposeCommand(ctx, command{op: opLeaseGrant, value: grantValue(id, ttl)})
	return id, r.err
}

// Revoke replicates the end of lease id: it and every key attached to it
// are deleted in one entry. ErrLeaseNotFound if there is no such lease.
func (n *Node) Revoke(ctx context.Context, id uint64) error {
	return n.proposeCommand(ctx, command{op: opLeaseRevoke, value: revokeValue(id, revokeByClient)}).err
}

// KeepAlive renews lease id on the leader: its deadline becomes now + TTL.
// It returns the TTL once a ReadIndex round begun after the renewal has
// confirmed this node still leads (see lessor.go for why that keeps a
// holder's view of the lease safe).
func (n *Node) KeepAlive(ctx context.Context, id uint64) (time.Duration, error) {
	if err := n.leaderHere(); err != nil {
		return 0, err
	}
	if err := n.ReadIndex(ctx); err != nil { // the lease's applied state is current
		return 0, err
	}
	ttl, err := n.leases.renew(id, n.leaseNow())
	if errors.Is(err, ErrNotLeader) {
		return 0, n.notLeader(n.Status().LeaderID)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %d", err, id)
	}
	if err := n.ReadIndex(ctx); err != nil {
		return 0, err
	}
	return ttl, nil
}

// TimeToLive reports lease id as the leader sees it.
func (n *Node) TimeToLive(ctx context.Context, id uint64) (LeaseInfo, error) {
	if err := n.leaderHere(); err != nil {
		return LeaseInfo{}, err
	}
	if err := n.ReadIndex(ctx); err != nil {
		return LeaseInfo{}, err
	}
	info, err := n.leases.info(id, n.leaseNow())
	switch {
	case errors.Is(err, ErrNotLeader):
		return info, n.notLeader(n.Status().LeaderID)
	case err != nil:
		return info, fmt.Errorf("%w: %d", err, id)
	}
	return info, nil
}

func (n *Node) leaderHere() error {
	if st := n.Status(); !st.IsLeader {
		return n.notLeader(st.LeaderID)
	}
	return nil
}

// LeaseCount is how many leases this node has applied.
func (n *Node) LeaseCount() int { return n.leases.count() }

func (n *Node) leaseNow() time.Time {
	if n.cfg.LeaseClock == nil { // a bare test node, without withDefaults
		return time.Now()
	}
	return n.cfg.LeaseClock()
}
