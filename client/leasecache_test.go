package client

import (
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestLeaseRefreshedInBackground: a GET that finds the cached lease
// expiry getting close (but not due) is answered without a header READ and
// starts one in the background, which renews the cache; that READ counts in
// the client's READs.
func TestLeaseRefreshedInBackground(t *testing.T) {
	r := newReadyRig(t)
	r.cacheLease(leaseRefreshAhead / 2)
	s0 := r.c.Stats()
	if v := r.get("k", Linearizable); v != "v1" {
		t.Fatalf("get k = %q", v)
	}
	want := uint64(r.f.serverClock() + int64(30*time.Minute))
	wait.For(t, "the cached lease to be refreshed", func() bool { return r.node().geo.Load().lease.exp.Load() >= want })
	s1 := r.c.Stats()
	if d := s1.LeaseRefreshes - s0.LeaseRefreshes; d != 1 {
		t.Errorf("LeaseRefreshes +%d, want +1", d)
	}
	if d := s1.OneSidedReads - s0.OneSidedReads; d != 4 { // BB, R, and the refresh's H
		t.Errorf("OneSidedReads +%d, want +4", d)
	}
}

// TestLeaseNotRefreshedWhenFar: with the cached expiry far from the bound,
// GETs make no header READ at all.
func TestLeaseNotRefreshedWhenFar(t *testing.T) {
	r := newReadyRig(t)
	for range 10 {
		if v := r.get("k", Linearizable); v != "v1" {
			t.Fatalf("get k = %q", v)
		}
	}
	time.Sleep(10 * time.Millisecond) // time for a background refresh, which must not come, to show
	// BB R, then B R nine times (the cached bucket, then the record).
	if s := r.c.Stats(); s.LeaseRefreshes != 0 || s.OneSidedReads != 3+9*2 {
		t.Fatalf("%d refreshes, %d READs for 10 GETs (one uncached), want 0 and 21", s.LeaseRefreshes, s.OneSidedReads)
	}
}
