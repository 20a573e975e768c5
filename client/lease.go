package client

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/wire"
)

// LeaseID names a TTL lease.
type LeaseID uint64

func (id LeaseID) String() string { return strconv.FormatUint(uint64(id), 10) }

// Lease TTL bounds (the server enforces the same).
const (
	MinLeaseTTL = limits.MinLeaseTTL
	MaxLeaseTTL = limits.MaxLeaseTTL
)

// ErrLeaseExpired: a KeepAlive could not renew its lease before the
// lease's TTL ran out by the holder's own reckoning (see KeepAlive).
var ErrLeaseExpired = errs.ErrLeaseExpired

// ErrLeaseExists: a Grant WithLeaseID named an id another lease has
// (etcd's "lease already exists"); nothing was applied.
// errors.Is(err, ErrBadRequest) holds for it too.
var ErrLeaseExists = errs.ErrLeaseExists

// GrantOption adjusts one Grant.
type GrantOption func(*grantOptions)

type grantOptions struct{ id LeaseID }

// WithLeaseID makes Grant create the lease with id rather than one the
// leader draws (etcd's LeaseGrantRequest.ID); 0 means the leader picks.
// The grant fails with ErrLeaseExists if a lease with id exists. Ids above
// math.MaxInt64 cannot be shown over etcd's API, whose ids are int64.
//
// As for every write, a grant that fails with ErrUnavailable may have been
// applied; the client retries it by itself only while no attempt can have
// taken effect, so an ErrLeaseExists is never the grant meeting its own
// earlier attempt.
func WithLeaseID(id LeaseID) GrantOption {
	return func(o *grantOptions) { o.id = id }
}

// Grant creates a lease of ttl (MinLeaseTTL to MaxLeaseTTL) and returns
// its id (see WithLeaseID to choose it). Keys PUT WithLease(id) are
// deleted, all in one Raft entry, when it is revoked or expires: when the
// leader has heard no keepalive for ttl. A new leader gives every lease
// its full ttl again, so a lease lives at least ttl after its last
// keepalive, and may live longer across leader changes and restarts.
func (c *Client) Grant(ctx context.Context, ttl time.Duration, opts ...GrantOption) (LeaseID, error) {
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return 0, fmt.Errorf("%w: lease TTL %v not in [%v, %v]", ErrBadRequest, ttl, MinLeaseTTL, MaxLeaseTTL)
	}
	var o grantOptions
	for _, f := range opts {
		f(&o)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	g := wire.LeaseGrant{TTL: ttl, ID: uint64(o.id)}
	resp, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpLeaseGrant, Value: wire.AppendLeaseGrant(nil, &g)}, false)
	if err != nil {
		return 0, err
	}
	return LeaseID(resp.Version), nil
}

// Revoke ends lease id at once: it and every key attached to it are
// deleted in one Raft entry. ErrLeaseNotFound if it does not exist.
func (c *Client) Revoke(ctx context.Context, id LeaseID) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	_, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpLeaseRevoke, Value: wire.AppendLeaseID(nil, uint64(id))}, false)
	return err
}

// KeepAliveOnce renews lease id once and returns its TTL: the lease then
// lives at least TTL from the moment this call was made (not from when it
// returned). ErrLeaseNotFound if the lease is gone.
func (c *Client) KeepAliveOnce(ctx context.Context, id LeaseID) (time.Duration, error) {
	r, err := c.Renew(ctx, id)
	return r.TTL, err
}

// Renewal is a lease renewal's answer.
type Renewal struct {
	// TTL: the lease lives at least TTL from the moment the call was made.
	TTL time.Duration
	// Revision is the store revision of the leader's applied state when
	// it renewed the lease (0 from a kvd that predates it): a linearizable
	// revision, read without a write, at which the lease existed.
	Revision uint64
}

// Renew is KeepAliveOnce, answering the store revision too.
func (c *Client) Renew(ctx context.Context, id LeaseID) (Renewal, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpLeaseKeepAlive, Value: wire.AppendLeaseID(nil, uint64(id))}, true)
	if err != nil {
		return Renewal{}, err
	}
	rev, err := wire.DecodeLeaseRenewal(resp.Value)
	if err != nil {
		return Renewal{}, fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	return Renewal{TTL: time.Duration(resp.Version), Revision: rev}, nil
}

// LeaseInfo is a lease as the leader sees it.
type LeaseInfo struct {
	ID        LeaseID
	TTL       time.Duration // as granted
	Remaining time.Duration // until the leader expires it
	Keys      uint64        // keys attached
}

// TimeToLive reports lease id; ErrLeaseNotFound if it does not exist.
func (c *Client) TimeToLive(ctx context.Context, id LeaseID) (LeaseInfo, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpLeaseTimeToLive, Value: wire.AppendLeaseID(nil, uint64(id))}, true)
	if err != nil {
		return LeaseInfo{}, err
	}
	var w wire.LeaseInfo
	if err := wire.DecodeLeaseInfo(resp.Value, &w); err != nil {
		return LeaseInfo{}, fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	return LeaseInfo{ID: LeaseID(w.ID), TTL: w.TTL, Remaining: w.Remaining, Keys: w.Keys}, nil
}

// OpPutLease is OpPut attaching key to lease id (see WithLease).
func OpPutLease(key, value []byte, id LeaseID) Op {
	return OpPut(key, value, WithLease(id))
}

// MaxLeaseListIDs is the most lease ids the leader answers one lease list
// request with; Leases asks for the following pages itself.
const MaxLeaseListIDs = wire.MaxLeaseListIDs

// Leases lists the ids of the leases that exist, ascending, as the leader
// sees them (etcd's LeaseLeases); leases it is expiring are left out. It
// reads pages of MaxLeaseListIDs, each linearizable on its own (a lease
// granted or revoked between two pages is listed as of its page), at most
// MaxLeases ids in all.
func (c *Client) Leases(ctx context.Context) ([]LeaseID, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var out []LeaseID
	var after uint64
	for {
		resp, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpLeaseList, Value: wire.AppendLeaseID(nil, after)}, true)
		if err != nil {
			return nil, err
		}
		var page wire.LeaseList
		if err := wire.DecodeLeaseList(resp.Value, &page); err != nil {
			return nil, fmt.Errorf("%w: %w", errMalformedReply, err)
		}
		if len(page.IDs) > 0 && page.IDs[0] <= after || page.More && len(page.IDs) == 0 {
			return nil, fmt.Errorf("%w: lease list page after %d does not move on", errMalformedReply, after)
		}
		for _, id := range page.IDs {
			out = append(out, LeaseID(id))
		}
		if !page.More {
			return out, nil
		}
		after = page.IDs[len(page.IDs)-1]
	}
}
