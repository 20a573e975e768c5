package raft

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/txn"
)

// manualClock is a TTL lease clock the test moves.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func putLease(ctx context.Context, n *Node, key string, lease uint64) error {
	_, _, err := n.Txn(ctx, &txn.Txn{Then: []txn.Op{{Type: txn.Put, Key: []byte(key), Value: []byte("v"), Lease: lease}}})
	return err
}

// TestLeaseSnapshotCatchUp: a follower that catches up from a snapshot
// receives the leases and their keys' attachments with the keys: it
// counts the lease's keys, and the lease's revoke deletes them there.
func TestLeaseSnapshotCatchUp(t *testing.T) {
	clk := &manualClock{t: time.Unix(1000, 0)}
	cfg := testConfig()
	cfg.SnapshotCount, cfg.SnapshotCatchUpEntries, cfg.SnapshotChunkSize = 20, 5, 512
	cfg.LeaseClock = clk.now
	c := newCluster(t, 3, cfg)
	lead := c.leader()
	down := c.follower(lead)
	c.caughtUp(down)
	c.stop(down.id)
	lead = c.leader()
	ctx := ctxT(t)
	id, err := lead.node.Grant(ctx, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := putLease(ctx, lead.node, fmt.Sprintf("leased%d", i), id); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 60 {
		c.put(fmt.Sprintf("key%03d", i), "x")
	}
	first, _ := lead.node.store.FirstIndex()
	back := c.start(down.id, false)
	if applied := back.node.Status().Applied; first <= applied+1 {
		t.Fatalf("leader's log starts at %d, follower applied %d: no snapshot needed", first, applied)
	}
	c.caughtUp(back)
	if _, restores, _ := back.app.snapshot(); restores == 0 {
		t.Fatal("follower caught up without installing a snapshot")
	}
	if n := back.node.LeaseCount(); n != 1 {
		t.Fatalf("follower has %d leases after the snapshot, want 1", n)
	}
	if err := lead.node.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	c.caughtUp(back)
	waitFor(t, "the revoke to delete the leased keys on the follower", func() bool {
		return maps.Equal(kvState(t, back.node), kvState(t, lead.node)) && back.node.LeaseCount() == 0
	})
	if _, ok := kvState(t, back.node)["leased0"]; ok {
		t.Fatal("revoked lease's key survives on the follower")
	}
}

// TestLeaseLimits: grants beyond Knobs.MaxLeases and PUTs beyond MaxLeaseKeys
// are refused when applied, with nothing written; TTLs out of range are
// refused before proposing.
func TestLeaseLimits(t *testing.T) {
	cfg := testConfig()
	cfg.Knobs = Knobs{MaxLeases: 2, MaxLeaseKeys: 2}
	c := newCluster(t, 1, cfg)
	n := c.leader().node
	ctx := ctxT(t)
	if _, err := n.Grant(ctx, 0, time.Millisecond); !errors.Is(err, ErrLeaseTTL) {
		t.Fatalf("1ms TTL: %v", err)
	}
	a, err := n.Grant(ctx, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Grant(ctx, a, time.Minute); !errors.Is(err, ErrLeaseExists) {
		t.Fatalf("grant of a taken id: %v", err)
	}
	b, err := n.Grant(ctx, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Grant(ctx, 0, time.Minute); !errors.Is(err, ErrTooManyLeases) {
		t.Fatalf("third grant: %v", err)
	}
	for _, k := range []string{"k1", "k2"} {
		if err := putLease(ctx, n, k, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := putLease(ctx, n, "k3", a); !errors.Is(err, txn.ErrLeaseFull) {
		t.Fatalf("third key: %v", err)
	}
	if err := putLease(ctx, n, "k2", a); err != nil {
		t.Fatalf("re-PUT of a key the full lease holds: %v", err)
	}
	if _, ok := kvState(t, n)["k3"]; ok {
		t.Fatal("refused PUT was applied")
	}
	if err := n.Revoke(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Grant(ctx, 0, time.Minute); err != nil {
		t.Fatalf("grant after a revoke freed room: %v", err)
	}
}
