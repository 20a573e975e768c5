package raft

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestFreezeStopsTheLoop: a frozen leader applies nothing and extends no
// lease (its lease runs out), the others elect a new leader, the frozen
// node follows it after the thaw, and Close ends a freeze at once.
func TestFreezeStopsTheLoop(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	old := c.leader()
	c.put("a", "1")
	// Long enough for the others to elect a new leader on a busy machine
	// (with the tests' 200 ms election timeout, normally well under 1 s).
	if err := old.node.Freeze(8 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := old.node.Freeze(time.Second); !errors.Is(err, ErrFrozen) {
		t.Fatalf("freeze of a frozen node: %v, want ErrFrozen", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := old.node.Put(ctx, []byte("b"), []byte("x"))
	cancel()
	if err == nil {
		t.Fatal("a frozen leader committed a write")
	}
	wait.For(t, "the frozen leader's lease to run out", func() bool { return !old.node.Status().LeaseValid })

	var rest []*testNode
	for _, tn := range c.running() {
		if tn != old {
			rest = append(rest, tn)
		}
	}
	// The others agree on a leader among themselves. (c.leader would take
	// the frozen node while they still follow it: its published status
	// still says it leads, and on a busy machine their election timeouts
	// can outlast its lease.)
	wait.For(t, "the others to elect a new leader", func() bool {
		var id uint64
		for _, tn := range rest {
			st := tn.node.Status()
			if st.LeaderID == 0 || st.LeaderID == old.id || (id != 0 && st.LeaderID != id) {
				return false
			}
			id = st.LeaderID
		}
		nl := c.nodes[id]
		return nl != nil && nl.node != nil && nl.node.Status().IsLeader
	})
	wait.For(t, "the thawed node to follow a new leader", func() bool {
		st := old.node.Status() // (nl itself may have lost an election since, on a busy machine)
		return !st.IsLeader && st.LeaderID != 0 && st.LeaderID != old.id
	})

	n := old.node
	if err := n.Freeze(time.Minute); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.stop(old.id)
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Close of a frozen node took %v", d)
	}
	if err := n.Freeze(time.Second); !errors.Is(err, ErrStopped) {
		t.Fatalf("freeze of a closed node: %v, want ErrStopped", err)
	}
}
