package raft

import (
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestTransferLeadershipLeaseLapsesFirst: TransferLeadership makes the
// target the leader, and the last read lease expiry the old leader
// published had passed before any node entered the new term and before
// the new leader committed a write (the transfer's forced vote skips the
// voters' lease check, so the leader must give the lease up first).
func TestTransferLeadershipLeaseLapsesFirst(t *testing.T) {
	cfg := testConfig()
	cfg.TickInterval = 50 * time.Millisecond // no spurious elections on a busy machine
	c := newCluster(t, 3, cfg)
	old := c.leader()
	wait.For(t, "leader lease", func() bool { return old.node.Status().LeaseValid })
	oldTerm := old.node.Status().Term
	var target *testNode
	for _, tn := range c.running() {
		if tn != old {
			target = tn
		}
	}
	// A loaded machine can delay the target's answers past the leader's
	// check that it was heard from lately: that refusal is retried.
	wait.For(t, "the transfer to be taken", func() bool {
		err := old.node.TransferLeadership(ctxT(t), target.id)
		if errors.Is(err, ErrTransferFailed) && old.node.Status().IsLeader {
			t.Logf("retrying: %v", err)
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true
	})
	wait.For(t, "the target to lead", func() bool { return target.node.Status().IsLeader })
	c.put("after", "transfer")
	committed := time.Now()
	var lapsed time.Time // the latest expiry the old leader published
	for _, ev := range old.leases.all() {
		if ev.term == oldTerm && ev.expiry.After(lapsed) {
			lapsed = ev.expiry
		}
	}
	if lapsed.IsZero() {
		t.Fatal("the old leader never published a lease")
	}
	for _, tn := range c.running() {
		for _, ev := range tn.leases.all() {
			if ev.term > oldTerm && !lapsed.Before(ev.at) {
				t.Fatalf("old lease lapsed at %v; node %d entered term %d at %v", lapsed, tn.id, ev.term, ev.at)
			}
		}
	}
	if !lapsed.Before(committed) {
		t.Fatal("the new leader committed before the old lease lapsed")
	}
	wait.For(t, "the new leader's lease", func() bool { return target.node.Status().LeaseValid })
}

// TestTransferLeadershipRefused: only the leader transfers, only to a
// voter; to itself is a no-op; a refused transfer leaves the leader its
// read lease.
func TestTransferLeadershipRefused(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	lead := c.leader()
	var follower *testNode
	for _, tn := range c.running() {
		if tn != lead {
			follower = tn
		}
	}
	ctx := ctxT(t)
	if err := follower.node.TransferLeadership(ctx, lead.id); !errors.Is(err, ErrNotLeader) {
		t.Errorf("transfer on a follower: %v, want not leader", err)
	}
	if err := lead.node.TransferLeadership(ctx, lead.id); err != nil || !lead.node.Status().IsLeader {
		t.Errorf("transfer to itself: %v", err)
	}
	if err := lead.node.TransferLeadership(ctx, 42); !errors.Is(err, ErrTransferTarget) {
		t.Errorf("transfer to a stranger: %v", err)
	}
	if err := lead.node.AddMember(ctx, 4, "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if err := lead.node.TransferLeadership(ctx, 4); !errors.Is(err, ErrTransferTarget) {
		t.Errorf("transfer to a learner: %v", err)
	}
	if !lead.node.Status().IsLeader {
		t.Errorf("a refused transfer changed the leader: %+v", lead.node.Status())
	}
	wait.For(t, "the leader's read lease (a refused transfer keeps it)", func() bool { return lead.node.Status().LeaseValid })
}
