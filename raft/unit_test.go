package raft

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tr := newMemNet().endpoint("a")
	valid := Config{ID: 1, DataDir: "/tmp/x", Transport: tr, InitialCluster: map[uint64]string{1: "a", 2: "b"}}
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"zero id", func(c *Config) { c.ID = 0 }, false},
		{"no data dir", func(c *Config) { c.DataDir = "" }, false},
		{"no transport", func(c *Config) { c.Transport = nil }, false},
		{"self not in peers", func(c *Config) { c.ID = 3 }, false},
		{"joining without addr", func(c *Config) { c.ID, c.Join = 3, true }, false},
		{"joining with addr", func(c *Config) { c.ID, c.Join, c.Addr = 3, true, "c" }, true},
		{"peer without addr", func(c *Config) { c.InitialCluster[2] = "" }, false},
		{"election not above heartbeat", func(c *Config) { c.ElectionTicks, c.HeartbeatTicks = 3, 3 }, false},
		{"drift too large", func(c *Config) { c.LeaseDrift = 0.6 }, false},
		{"drift negative", func(c *Config) { c.LeaseDrift = -0.1 }, false},
		{"drift NaN", func(c *Config) { c.LeaseDrift = math.NaN() }, false},
		{"lease too short", func(c *Config) { c.ElectionTicks, c.LeaseDrift = 2, 0.5 }, false},
		{"catch-up above snapshot count", func(c *Config) { c.SnapshotCount, c.SnapshotCatchUpEntries = 10, 11 }, false},
		{"small snapshot count takes a small catch-up default", func(c *Config) { c.SnapshotCount = 10 }, true},
		{"message size near transport limit", func(c *Config) { c.MaxSizePerMsg = 3 << 20 }, false},
		{"tick below 1ms", func(c *Config) { c.TickInterval = time.Microsecond }, false},
		{"raft log in pebble", func(c *Config) { c.RaftLog = "pebble" }, true},
		{"raft log in a wal", func(c *Config) { c.RaftLog = "wal" }, true},
		{"raft log elsewhere", func(c *Config) { c.RaftLog = "files" }, false},
	}
	for _, tt := range tests {
		c := valid
		c.InitialCluster = map[uint64]string{1: "a", 2: "b"}
		tt.mod(&c)
		err := c.Validate()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%s: Validate() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{ID: 1, InitialCluster: map[uint64]string{1: "a"}}.withDefaults()
	if c.TickInterval != 100*time.Millisecond || c.ElectionTicks != 10 || c.HeartbeatTicks != 1 ||
		c.SnapshotCount != 10000 || c.SnapshotCatchUpEntries != 5000 || c.Addr != "a" || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	// 1s election timeout, 10% drift, one tick of margin.
	if got := c.leaseDuration(); got != 800*time.Millisecond {
		t.Fatalf("lease duration %v, want 800ms", got)
	}
}

func TestMemberContextRoundTrip(t *testing.T) {
	for _, m := range []memberContext{{}, {proposer: 7, reqID: 1 << 40, addr: "10.0.0.1:7000"}, {addr: "x"}} {
		got, err := decodeMemberContext(appendMemberContext(nil, m))
		if err != nil || got != m {
			t.Errorf("round trip of %+v: %+v, %v", m, got, err)
		}
	}
}

func TestNotLeaderError(t *testing.T) {
	var err error = fmt.Errorf("put: %w", &NotLeaderError{LeaderID: 2, LeaderAddr: "b:1"})
	var nl *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderID != 2 || nl.LeaderAddr != "b:1" {
		t.Fatalf("errors.Is/As failed on %v", err)
	}
	if !errors.Is(err, &NotLeaderError{}) {
		t.Fatal("errors.Is with a *NotLeaderError target failed")
	}
	if errors.Is(ErrNotLeader, ErrStopped) || errors.Is(&NotLeaderError{}, ErrStopped) {
		t.Fatal("NotLeaderError matches an unrelated sentinel")
	}
}

// TestLeasePublishesExpiry checks that every change of the lease is
// published at once, in order, as an absolute expiry, and that a lease
// lapses by time with nobody acting.
func TestLeasePublishesExpiry(t *testing.T) {
	var events []leaseEvent
	l := newLease(func(term uint64, exp time.Time) { events = append(events, leaseEvent{time.Now(), term, exp}) }, 4, time.Now)
	now := time.Now()
	l.now = func() time.Time { return now }
	want := func(term uint64, exp time.Time) {
		t.Helper()
		if len(events) != 1 || events[0].term != term || !events[0].expiry.Equal(exp) {
			t.Fatalf("events %+v, want one (%d, %v)", events, term, exp)
		}
		events = events[:0]
	}
	e1 := now.Add(30 * time.Millisecond)
	l.extend(5, e1)
	want(5, e1)
	l.extend(5, e1.Add(-time.Millisecond)) // an older grant changes nothing
	if len(events) != 0 || !l.valid() {
		t.Fatalf("older grant: events %+v valid %v", events, l.valid())
	}
	now = e1 // lapsed by time, with nobody poking the lease
	if l.valid() || len(events) != 0 {
		t.Fatal("lease valid at its expiry, or a lapse was published")
	}
	e2 := now.Add(time.Hour)
	l.extend(5, e2)
	want(5, e2)
	l.revoke()
	want(5, time.Time{})
	l.revoke() // nothing to end
	if len(events) != 0 {
		t.Fatalf("second revoke published %+v", events)
	}
	l.extend(5, e2)
	want(5, e2)
	l.setTerm(6) // a new term ends it
	want(6, time.Time{})
	if l.valid() {
		t.Fatal("lease valid in a new term")
	}
}
