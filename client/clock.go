package client

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/internal/monoclock"
	"github.com/kvd-project/kvd/internal/wire"
)

// A linearizable one-sided GET is accepted only while the node's lease
// holds. The node publishes when its lease ends as a reading of its own
// monotonic clock; the client bounds that clock from above on its own
// clock and accepts a read only if the bound is still below the expiry at
// the moment it decides (after every READ of the GET has completed).
//
// The bound comes from a clock RPC: the node read its clock (mono) at some
// moment after the client sent the request (sent), so at any later client
// time now, the node's clock reads at most
//
//	mono + (now - sent) * (1 + LeaseDrift)
//
// if the node's clock runs at most LeaseDrift faster than the client's.
// Nothing else is assumed: not that the clocks agree, not that the node is
// running. A node that freezes stops extending its lease, and the bound
// reaches the last expiry it published at the latest when its own clock
// would have: a frozen leader serves linearizable GETs for at most the
// rest of its lease (at most one lease period) after the freeze begins,
// however long the freeze lasts. See docs/consistency.md.

// Clock sampling policy.
const (
	// clockRefreshAge: a sample older than this is refreshed in the
	// background, so a busy client never waits for one.
	clockRefreshAge = 500 * time.Millisecond
	// clockMaxAge: a sample older than this (an idle client) is refreshed
	// before a linearizable read, since its bound has drifted up by
	// LeaseDrift of its age and would fail a valid lease anyway.
	clockMaxAge = 2 * time.Second
	// clockRetryAge: a lease check that fails with a sample older than this
	// may have failed for the sample's uncertainty alone, so it is worth a
	// fresh sample before concluding the lease is gone.
	clockRetryAge = 50 * time.Millisecond
	// clockTimeout bounds a clock or hello RPC made on a GET's behalf, so a
	// frozen node costs a GET this much, not its whole deadline.
	clockTimeout = 500 * time.Millisecond
)

// errClockStale: the client's bound on the node's clock is too loose to
// judge the lease; sample the clock again.
var errClockStale = errors.New("clock sample too old to judge the lease")

// mono is a reading of the client's own clock: the process's monotonic
// clock in nanoseconds (monoclock.Raw), by which it judges leases and how
// long a GET took. One reading is one system call where time.Now would
// make two on a machine whose clock source has no vDSO fast path.
type mono int64

func monoNow() mono { return mono(monoclock.Raw()) }

// clockOf is the clock a client with knobs k reads: monoNow, or the test's.
func clockOf(k Knobs) func() mono {
	if k.Clock == nil {
		return monoNow
	}
	return func() mono { return mono(k.Clock()) }
}

// sub is the time from o to m.
func (m mono) sub(o mono) time.Duration { return time.Duration(m - o) }

// clockSample is one answer to a clock RPC. Immutable once published.
type clockSample struct {
	mono int64 // the node's clock, read after sent
	sent mono  // the client's clock when the request left
}

// upper bounds the node's clock at client time now.
func (c *clockSample) upper(now mono, drift float64) int64 {
	el := now.sub(c.sent)
	return c.mono + int64(el) + int64(float64(el)*drift)
}

// nodeClock is the client's estimate of one node's clock.
type nodeClock struct {
	now        func() mono // the client's clock
	drift      float64
	syncs      *atomic.Uint64 // the client's count of clock RPCs, if any
	sample     atomic.Pointer[clockSample]
	refreshing atomic.Bool
}

// check judges a lease that ends at expiry (node clock, 0: none) at client
// time now.
func (k *nodeClock) check(expiry uint64, now mono) error {
	if expiry == 0 {
		return errLease
	}
	s := k.sample.Load()
	if s == nil {
		return errClockStale
	}
	if u := s.upper(now, k.drift); u >= 0 && uint64(u) < expiry {
		return nil
	}
	if now.sub(s.sent) > clockRetryAge {
		return errClockStale
	}
	return errLease
}

// upperAt is the bound on the node's clock at client time now; false if
// there is no sample.
func (k *nodeClock) upperAt(now mono) (int64, bool) {
	s := k.sample.Load()
	if s == nil {
		return 0, false
	}
	return s.upper(now, k.drift), true
}

// age is how old the current sample is at now (a very large age if none).
func (k *nodeClock) age(now mono) time.Duration {
	s := k.sample.Load()
	if s == nil {
		return 1 << 62
	}
	return now.sub(s.sent)
}

// offer keeps whichever of the current sample and s gives the tighter
// bound from now on (both bounds grow at the same rate).
func (k *nodeClock) offer(s *clockSample) {
	for {
		cur := k.sample.Load()
		now := k.now()
		if cur != nil && cur.upper(now, k.drift) <= s.upper(now, k.drift) {
			return
		}
		if k.sample.CompareAndSwap(cur, s) {
			return
		}
	}
}

// syncClock samples n's clock with one RPC.
func (n *node) syncClock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, clockTimeout)
	defer cancel()
	if n.clock.syncs != nil {
		n.clock.syncs.Add(1)
	}
	sent := n.clock.now()
	resp, err := n.call(ctx, &wire.Request{Op: wire.OpClock})
	if err != nil {
		return err
	}
	if resp.Status != wire.StatusOK || resp.Version == 0 || resp.Version > 1<<62 {
		return errors.New("kvd: bad clock reply")
	}
	n.clock.offer(&clockSample{mono: int64(resp.Version), sent: sent})
	return nil
}

// maybeRefreshClock starts a background sample if the current one is
// getting old and none is under way.
func (n *node) maybeRefreshClock(now mono) {
	if n.clock.age(now) < clockRefreshAge || n.clock.refreshing.Swap(true) {
		return
	}
	go func() {
		defer n.clock.refreshing.Store(false)
		_ = n.syncClock(context.Background()) // a failure leaves the old sample to age out
	}()
}
