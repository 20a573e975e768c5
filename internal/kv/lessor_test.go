package kv

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft"
)

// TestLessorExpiry drives the leader's lease clock by hand: a lease
// expires at its deadline and not a nanosecond before; a keepalive moves
// the deadline to now + TTL; an expiring lease refuses keepalives; a lost
// revoke is proposed again after retry; a follower expires nothing.
func TestLessorExpiry(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const ttl, retry = 10 * time.Second, time.Second
	ls := newLessor()
	ls.granted(1, ttl, t0) // a follower's apply: no deadline
	if ids := ls.expired(t0.Add(time.Hour), retry); len(ids) != 0 {
		t.Fatalf("a follower expired %v", ids)
	}
	if _, err := ls.renew(1, t0); !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("follower keepalive: %v", err)
	}
	ls.promote(t0)
	ls.granted(2, ttl, t0.Add(5*time.Second))
	if ids := ls.expired(t0.Add(ttl-1), retry); len(ids) != 0 {
		t.Fatalf("expired %v before the deadline", ids)
	}
	if got, err := ls.renew(1, t0.Add(9*time.Second)); err != nil || got != ttl {
		t.Fatalf("keepalive: %v, %v", got, err)
	}
	if ids := ls.expired(t0.Add(ttl), retry); len(ids) != 0 {
		t.Fatalf("expired %v at 10s: lease 1 was kept alive at 9s, lease 2 granted at 5s", ids)
	}
	if ids := ls.expired(t0.Add(15*time.Second), retry); !slices.Equal(ids, []uint64{2}) {
		t.Fatalf("at 15s expired %v, want [2]", ids)
	}
	if _, err := ls.renew(2, t0.Add(15*time.Second)); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("keepalive of an expiring lease: %v", err)
	}
	if ids := ls.expired(t0.Add(15*time.Second+retry/2), retry); len(ids) != 0 {
		t.Fatalf("revoke re-proposed before retry: %v", ids)
	}
	if ids := ls.expired(t0.Add(15*time.Second+retry), retry); !slices.Equal(ids, []uint64{2}) {
		t.Fatalf("lost revoke not re-proposed: %v", ids)
	}
	ls.revoked(2)
	if ids := ls.expired(t0.Add(19*time.Second-1), retry); len(ids) != 0 {
		t.Fatalf("expired %v before 19s", ids)
	}
	if ids := ls.expired(t0.Add(19*time.Second), retry); !slices.Equal(ids, []uint64{1}) {
		t.Fatalf("at 19s expired %v, want [1]", ids)
	}
}

// TestLessorNewLeaderFullTTL: a new leader (promote), and a restarted node
// that becomes leader (reset, then promote), start every lease at its
// full TTL from the promotion, whatever was left of it before.
func TestLessorNewLeaderFullTTL(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const ttl = 10 * time.Second
	ls := newLessor()
	ls.promote(t0)
	ls.granted(1, ttl, t0)
	ls.demote() // deposed at t0+9s
	ls.promote(t0.Add(20 * time.Second))
	if ids := ls.expired(t0.Add(30*time.Second-1), time.Second); len(ids) != 0 {
		t.Fatalf("new leader expired %v before its election + TTL", ids)
	}
	if ids := ls.expired(t0.Add(30*time.Second), time.Second); len(ids) != 1 {
		t.Fatalf("new leader did not expire at election + TTL: %v", ids)
	}

	restarted := newLessor()
	restarted.reset([]store.Lease{{ID: 7, TTL: uint64(ttl), Keys: 3}}, t0)
	restarted.promote(t0.Add(time.Minute))
	info, err := restarted.info(7, t0.Add(time.Minute))
	if err != nil || info.Remaining != ttl || info.Keys != 3 {
		t.Fatalf("after restart: %+v, %v; want the full TTL and 3 keys", info, err)
	}
}

// TestLessorExpiryBounded: one call proposes at most maxExpirePerTick
// revokes, the rest at later ticks.
func TestLessorExpiryBounded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ls := newLessor()
	ls.promote(t0)
	for id := uint64(1); id <= maxExpirePerTick+5; id++ {
		ls.granted(id, time.Second, t0)
	}
	now := t0.Add(time.Second)
	if n := len(ls.expired(now, time.Hour)); n != maxExpirePerTick {
		t.Fatalf("first tick expired %d", n)
	}
	if n := len(ls.expired(now, time.Hour)); n != 5 {
		t.Fatalf("second tick expired %d, want 5", n)
	}
}

// TestLessorList: the leader lists leases in id order, a page at a time
// from after an id, leaving out those it is expiring; a follower lists
// nothing (it does not know which are expiring).
func TestLessorList(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ls := newLessor()
	for _, id := range []uint64{9, 3, 7, 1} {
		ls.granted(id, time.Minute, t0)
	}
	if _, _, err := ls.list(0, 10); !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("follower list: %v", err)
	}
	ls.promote(t0)
	ls.granted(5, time.Second, t0)
	ls.expired(t0.Add(time.Second), time.Second) // lease 5 is being expired
	for _, tc := range []struct {
		after uint64
		max   int
		want  []uint64
		more  bool
	}{
		{0, 10, []uint64{1, 3, 7, 9}, false},
		{0, 2, []uint64{1, 3}, true},
		{3, 2, []uint64{7, 9}, false},
		{9, 2, nil, false},
	} {
		ids, more, err := ls.list(tc.after, tc.max)
		if err != nil || !slices.Equal(ids, tc.want) || more != tc.more {
			t.Errorf("list(%d, %d) = %v, %v, %v; want %v, %v", tc.after, tc.max, ids, more, err, tc.want, tc.more)
		}
	}
}
