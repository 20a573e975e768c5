package client

import (
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/table"
)

// TestLeaseBoundAllowsForDrift: the client bounds the leader's clock by its
// last sample plus the client time since, times 1+LeaseDrift, because the
// leader's clock may run up to LeaseDrift faster than the client's. Here
// it runs 8% faster (within the default 10%): the lease, 400ms on the
// leader's clock from the sample, ends after 370ms of the client's. A GET
// at 380ms of client time, when the leader's clock reads 410ms, must not
// be accepted (a bound without the allowance, 380ms, would accept it); one
// at 340ms (367ms on the leader's clock, bound 374ms) is.
//
// Both clocks are the test's (simClock): nothing moves them between the
// sample and the decision but the test, and no background sampling or
// lease refresh runs, so the bound at the decision is exactly the one
// computed here.
func TestLeaseBoundAllowsForDrift(t *testing.T) {
	const (
		rate  = 1.08 // the leader's clock against the client's
		lease = 400 * time.Millisecond
		R     = defaultReadRetries
	)
	var sim *simClock
	ready := func(t *testing.T) *rig {
		sim = newSimClock(rate)
		r := newRigOn(t, table.Config{}, sim)
		r.put("k", "v1")
		r.lease(lease) // the header's expiry, read at connect with the clock sample
		r.connect()
		n := r.node()
		if s := n.clock.sample.Load(); s == nil || s.sent != mono(sim.client()) {
			t.Fatalf("clock sample %+v, want one taken at connect", s)
		}
		n.clock.refreshing.Store(true) // no background clock sample
		t.Cleanup(func() { n.clock.refreshing.Store(false) })
		noLeaseRefresh(r)
		return r
	}
	at := func(d time.Duration) func(*rig) { return func(*rig) { sim.advance(d) } }
	runProtoCases(t, []protoCase{
		// The bound, 340ms*1.1 = 374ms, is below the expiry, but within
		// leaseDueMargin of it: the header joins round trip 1.
		{name: "lease holds on the leader's clock", setup: at(340 * time.Millisecond),
			want: "v1", oneSided: 1, trace: traceHitH},
		// The bound, 380ms*1.1 = 418ms, is past the expiry: the lease may
		// have ended (it has: 410ms). The sample is older than
		// clockRetryAge, so the client samples again (410ms), which
		// proves it; every attempt fails, and the GET asks by RPC.
		{name: "lease ended on the leader's clock", setup: at(380 * time.Millisecond),
			want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease+clock": R}, trace: repTrace(R, traceHitH...)},
		{name: "lease ended on the leader's clock, serializable", level: Serializable, setup: at(380 * time.Millisecond),
			want: "v1", oneSided: 1, trace: traceHit},
	}, ready)
}
