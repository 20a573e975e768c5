package raft

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	dto "github.com/prometheus/client_model/go"
)

// holdingLeader starts a 3-node cluster, stops its followers from making
// anything durable (their WAL fsyncs block, and with them their loops),
// and has the leader append a write of key "a" that therefore cannot
// commit. It returns once the leader's log holds that entry, with the
// entry's index and the write's outcome.
func holdingLeader(t *testing.T) (*walGate, *testNode, uint64, <-chan error) {
	g := newWALGate()
	cfg := testConfig()
	// CheckQuorum deposes a leader whose followers are silent for an
	// election timeout: 2 s here, to leave the test time to look.
	cfg.ElectionTicks = 100
	cfg.FS = errorfs.Wrap(vfs.Default, &g.inj)
	c := newCluster(t, 3, cfg)
	c.put("warm", "up")
	ld := c.leader()
	var followers []string
	for _, tn := range c.running() {
		if tn != ld {
			followers = append(followers, tn.dir)
		}
	}
	g.close(followers...)
	t.Cleanup(g.open)
	next := lastIndex(t, ld) + 1
	first := putAsync(ld.node, "a")
	waitFor(t, "the leader to append the first write", func() bool { return lastIndex(t, ld) == next })
	return g, ld, next, first
}

func heldCommands(t *testing.T, n *Node) int {
	t.Helper()
	var m dto.Metric
	if err := n.metrics.proposalsHeld.Write(&m); err != nil {
		t.Fatal(err)
	}
	return int(m.GetGauge().GetValue())
}

func outcome(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatal("a write never finished")
		return nil
	}
}

// TestLeaderHoldsBatchWhileOneIsUncommitted: while a batch of the leader's
// is uncommitted, later writes wait, out of the log, and go out together
// as one batch once it commits (batch.go, "Holding a batch").
func TestLeaderHoldsBatchWhileOneIsUncommitted(t *testing.T) {
	g, ld, aIndex, first := holdingLeader(t)
	b0, c0 := batchStats(t, ld.node)
	var later []<-chan error
	for i, key := range []string{"b", "c", "d"} {
		later = append(later, putAsync(ld.node, key))
		waitFor(t, fmt.Sprintf("%d writes held", i+1), func() bool { return heldCommands(t, ld.node) == i+1 })
		if got := lastIndex(t, ld); got != aIndex {
			t.Fatalf("held writes entered the log: last index %d, want %d", got, aIndex)
		}
	}
	g.open()
	for _, done := range append(later, first) {
		if err := outcome(t, done); err != nil {
			t.Fatal(err)
		}
	}
	if b, cmds := batchStats(t, ld.node); b-b0 != 1 || cmds-c0 != 3 {
		t.Fatalf("the held writes went out as %d commands in %d batches, want 3 in 1", cmds-c0, b-b0)
	}
	if n := heldCommands(t, ld.node); n != 0 {
		t.Fatalf("%d commands still held", n)
	}
}

// TestHeldWritesFailWhenLeaderStepsDown: writes held by a leader that
// loses its leadership fail at once, as never proposed (safe to retry),
// rather than waiting for their callers to give up.
func TestHeldWritesFailWhenLeaderStepsDown(t *testing.T) {
	_, ld, _, first := holdingLeader(t)
	held := putAsync(ld.node, "b")
	waitFor(t, "the write held", func() bool { return heldCommands(t, ld.node) == 1 })
	// The followers, stuck in their fsyncs, answer no heartbeat: the
	// leader steps down after an election timeout (CheckQuorum).
	if err := outcome(t, held); !errors.Is(err, ErrProposalDropped) {
		t.Fatalf("held write: %v, want ErrProposalDropped", err)
	}
	if err := outcome(t, first); !errors.Is(err, ErrLeaderChanged) {
		t.Fatalf("uncommitted write: %v, want ErrLeaderChanged", err)
	}
	if ld.node.Status().IsLeader {
		t.Fatal("the leader did not step down")
	}
}
