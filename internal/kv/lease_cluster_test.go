package kv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft"
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

func putLease(ctx context.Context, n *Store, key string, lease uint64) error {
	_, _, err := n.Txn(ctx, &txn.Txn{Then: []txn.Op{{Type: txn.Put, Key: []byte(key), Value: []byte("v"), Lease: lease}}}, raft.Admission{})
	return err
}

// TestLeaseSnapshotCatchUp: a follower that catches up from a snapshot
// receives the leases and their keys' attachments with the keys: it
// counts the lease's keys, and the lease's revoke deletes them there.
func TestLeaseSnapshotCatchUp(t *testing.T) {
	clk := &manualClock{t: time.Unix(1000, 0)}
	cfg := testConfig()
	cfg.Raft.SnapshotCount, cfg.Raft.SnapshotCatchUpEntries, cfg.Raft.SnapshotChunkSize = 20, 5, 512
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
	first := firstIndex(t, lead.node)
	back := c.start(down.id, false)
	if applied := back.node.Node().Status().Applied; first <= applied+1 {
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
	wait.For(t, "the revoke to delete the leased keys on the follower", func() bool {
		return maps.Equal(kvState(t, back.node), kvState(t, lead.node)) && back.node.LeaseCount() == 0
	})
	if _, ok := kvState(t, back.node)["leased0"]; ok {
		t.Fatal("revoked lease's key survives on the follower")
	}
}

// TestLeaseLimits: grants beyond MaxLeases and PUTs beyond MaxLeaseKeys (lowered by Knobs)
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
	if _, err := n.Grant(ctx, 0, time.Minute); !errors.Is(err, ErrTooManyLeases) || strings.Contains(err.Error(), "raft") {
		t.Fatalf("third grant: %v (want too many leases, naming no internal package)", err)
	}
	for _, k := range []string{"k1", "k2"} {
		if err := putLease(ctx, n, k, a); err != nil {
			t.Fatal(err)
		}
	}
	err = putLease(ctx, n, "k3", a)
	if !errors.Is(err, txn.ErrLeaseFull) {
		t.Fatalf("third key: %v", err)
	}
	// A PUT with a lease is a transaction inside, which its error must
	// not name: the operator ran a put.
	if msg := err.Error(); strings.Contains(msg, "txn") || strings.Contains(msg, "raft") {
		t.Errorf("full lease: %q names an internal package", msg)
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

// TestLeaseFullTxnCountsDetaches: a transaction's branch is applied as its
// operations one after the other. On a full lease (Knobs.MaxLeaseKeys keys), a
// branch that first deletes one of its keys (or re-PUTs it without the
// lease) and then attaches another key leaves the lease full, not over:
// applied one at a time, both operations succeed. A lease check that
// counted the attach but not the detach before it would refuse the whole
// transaction with ErrLeaseFull.
func TestLeaseFullTxnCountsDetaches(t *testing.T) {
	cfg := testConfig()
	cfg.Knobs.MaxLeaseKeys = 2
	c := newCluster(t, 1, cfg)
	n := c.leader().node
	ctx := ctxT(t)
	a, err := n.Grant(ctx, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k1", "k2"} {
		if err := putLease(ctx, n, k, a); err != nil {
			t.Fatal(err)
		}
	}
	for name, first := range map[string]txn.Op{
		"delete k1":            {Type: txn.Delete, Key: []byte("k1")},
		"put k1 without lease": {Type: txn.Put, Key: []byte("k1"), Value: []byte("v")},
	} {
		// Restore k1 on the lease between cases.
		if err := putLease(ctx, n, "k1", a); err != nil {
			t.Fatal(err)
		}
		_, _, err := n.Txn(ctx, &txn.Txn{Then: []txn.Op{first,
			{Type: txn.Put, Key: []byte("k3"), Value: []byte("v"), Lease: a}}}, raft.Admission{})
		if err != nil {
			t.Errorf("txn {%s; put k3 with the lease} on a full lease: %v (one at a time, both apply and the lease stays at %d keys)",
				name, err, cfg.Knobs.MaxLeaseKeys)
		}
		// Undo k3 for the next case.
		if _, _, err := n.Delete(ctx, []byte("k3")); err != nil {
			t.Fatal(err)
		}
	}
	// Writes of keys not on the lease make no room.
	if err := putLease(ctx, n, "k1", a); err != nil {
		t.Fatal(err)
	}
	_, _, err = n.Txn(ctx, &txn.Txn{Then: []txn.Op{{Type: txn.Delete, Key: []byte("k9")},
		{Type: txn.Put, Key: []byte("k3"), Value: []byte("v"), Lease: a}}}, raft.Admission{})
	if !errors.Is(err, txn.ErrLeaseFull) {
		t.Errorf("txn {delete k9 (on no lease); put k3 with the full lease}: %v, want ErrLeaseFull", err)
	}
}

// TestKeepAliveAfterRevokeMeanwhile: a lease revoked between a
// keep-alive's renewal and the round that confirms it is not reported
// alive: the keep-alive looks the lease up again after that round and
// fails with ErrLeaseNotFound, as it would had the revoke come first.
func TestKeepAliveAfterRevokeMeanwhile(t *testing.T) {
	cfg := testConfig()
	var revoke func(id uint64)
	cfg.Knobs.AfterRenew = func(id uint64) {
		if revoke != nil {
			revoke(id)
		}
	}
	c := newCluster(t, 3, cfg)
	lead := c.leader()
	ctx := ctxT(t)
	id, err := lead.node.Grant(ctx, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if ttl, _, err := lead.node.KeepAlive(ctx, id); err != nil || ttl != time.Minute {
		t.Fatalf("keep-alive of a live lease: ttl %v, err %v", ttl, err)
	}
	revoke = func(id uint64) {
		revoke = nil
		if err := lead.node.Revoke(ctx, id); err != nil {
			t.Errorf("revoke: %v", err)
		}
	}
	ttl, _, err := lead.node.KeepAlive(ctx, id)
	if !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("keep-alive of a lease revoked before it was confirmed: ttl %v, err %v; want ErrLeaseNotFound", ttl, err)
	}
}

// TestKeepAliveConfirmedAfterRenewal: a keep-alive is answered only after
// a quorum round begun after its renewal: a leader cut off from its
// followers between the two answers none (lessor.go, the holder's side).
func TestKeepAliveConfirmedAfterRenewal(t *testing.T) {
	cfg := testConfig()
	var cut func()
	cfg.Knobs.AfterRenew = func(uint64) {
		if cut != nil {
			cut()
		}
	}
	c := newCluster(t, 3, cfg)
	lead := c.leader()
	id, err := lead.node.Grant(ctxT(t), 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cut = func() {
		cut = nil
		for _, tn := range c.running() {
			if tn != lead {
				c.stop(tn.id)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ttl, _, err := lead.node.KeepAlive(ctx, id); err == nil {
		t.Fatalf("a leader without its followers answered a keep-alive (ttl %v)", ttl)
	}
}
