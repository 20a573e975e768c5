package raft

import (
	"testing"
	"time"
)

// TestLeaseGrantWaitsForApply checks that an answered lease request
// extends the lease only once its read index is applied (the region must
// show every acknowledged write first), and that grants still waiting when
// the leadership ends die with it. kvd's loop applies what a Ready commits
// before it steps another message, so the scenarios (testdata/lease), which
// drive that loop, never make a grant wait: this is the only place the
// wait is seen.
func TestLeaseGrantWaitsForApply(t *testing.T) {
	const dur = 800 * time.Millisecond
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	var published []time.Time
	ls := newLease(func(_ uint64, exp time.Time) { published = append(published, exp) }, 3, func() time.Time { return t0 })
	var g leaseGrants
	sent := 0
	readIndex := func([]byte) { sent++ }

	// A new leader of term 3 whose applier is behind: committed 6, applied 3.
	g.tick(true, 3, t0, dur, readIndex)
	g.answered(1, 6)
	g.grant(ls, true, 3, 3, dur)
	if len(published) != 0 {
		t.Fatalf("lease granted at applied 3 for read index 6: %v", published)
	}
	g.grant(ls, true, 3, 6, dur)
	if len(published) != 1 || !published[0].Equal(t0.Add(dur)) {
		t.Fatalf("after the apply: published %v, want one expiry %v", published, t0.Add(dur))
	}

	// Its applier falls behind again, and it steps down before catching up:
	// the waiting grant is never published.
	g.tick(true, 3, t0.Add(100*time.Millisecond), dur, readIndex)
	g.answered(2, 9)
	g.grant(ls, true, 3, 8, dur)
	g.grant(ls, false, 3, 9, dur)
	g.drop()
	g.grant(ls, true, 3, 9, dur)
	if len(published) != 1 {
		t.Fatalf("a grant of an ended leadership was published: %v", published)
	}
	if sent != 2 {
		t.Fatalf("%d lease requests sent, want 2", sent)
	}
}
