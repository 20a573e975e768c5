package raft

import (
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/txn"
)

// TestLeaseFullTxnCountsDetaches: a transaction's branch is applied as its
// operations one after the other. On a full lease (Knobs.MaxLeaseKeys keys), a
// branch that first deletes one of its keys (or re-PUTs it without the
// lease) and then attaches another key leaves the lease full, not over:
// applied one at a time, both operations succeed. The lease check counts
// the attach but not the detach before it, and refuses the whole
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
			{Type: txn.Put, Key: []byte("k3"), Value: []byte("v"), Lease: a}}})
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
		{Type: txn.Put, Key: []byte("k3"), Value: []byte("v"), Lease: a}}})
	if !errors.Is(err, txn.ErrLeaseFull) {
		t.Errorf("txn {delete k9 (on no lease); put k3 with the full lease}: %v, want ErrLeaseFull", err)
	}
}
