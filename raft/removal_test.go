package raft

import (
	"errors"
	"maps"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestRemovedMemberStops: a removed member stops with a *RemovedError
// (ErrRemoved) as its Failure, whether it was connected (it applies its
// removal, or is told by the farewell) or cut off during the removal (it
// is told when it next reaches a member, which refuses it as removed),
// and its data directory refuses to open again. Without stopRemoved the
// cut-off node campaigned for good (and served its last state).
func TestRemovedMemberStops(t *testing.T) {
	for _, cutOff := range []bool{false, true} {
		name := map[bool]string{false: "connected", true: "cut off"}[cutOff]
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, 3, testConfig())
			c.put("a", "1")
			lead := c.leader()
			gone := c.follower(lead)
			c.caughtUp(gone)
			if cutOff {
				c.net.isolate(gone.addr, true)
			}
			if err := lead.node.RemoveMember(ctxT(t), gone.id); err != nil {
				t.Fatal(err)
			}
			if cutOff {
				if _, err := lead.node.Put(ctxT(t), []byte("b"), []byte("2")); err != nil { // the cluster goes on without it
					t.Fatal(err)
				}
				c.net.isolate(gone.addr, false)
			}
			wait.For(t, "the removed member to stop", func() bool {
				select {
				case <-gone.node.Failed():
					return true
				default:
					return false
				}
			})
			var re *RemovedError
			if err := gone.node.Failure(); !errors.As(err, &re) || !errors.Is(err, ErrRemoved) || re.ID != gone.id {
				t.Fatalf("Failure() = %v, want a *RemovedError for %d", err, gone.id)
			}
			if cutOff && re.By == 0 {
				t.Fatalf("a member cut off during its removal applied it itself: %v", re)
			}
			c.stop(gone.id)
			c.put("c", "3") // the others commit on
			cfg := c.base
			cfg.ID, cfg.DataDir, cfg.Transport, cfg.Addr = gone.id, gone.dir, c.net.transport(t, "restart"), gone.addr
			cfg.InitialCluster = maps.Clone(c.peers)
			cfg = withKV(cfg, newApplierLog())
			if n, err := Open(cfg); !errors.Is(err, ErrRemoved) {
				if n != nil {
					n.Close()
				}
				t.Fatalf("reopening the removed member's data directory: %v, want ErrRemoved", err)
			}
		})
	}
}

// TestRemovingTheLeaderHandsOff: RemoveMember of the leader itself first
// hands leadership to another voter, as etcd does, and answers with the
// new leader, which then removes the old one as a follower. Without
// handOff the leader removed itself and the others had no leader for an
// election timeout.
func TestRemovingTheLeaderHandsOff(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	c.put("a", "1")
	old := c.leader()
	err := old.node.RemoveMember(ctxT(t), old.id)
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderID == 0 || nl.LeaderID == old.id {
		t.Fatalf("RemoveMember of the leader itself = %v, want a *NotLeaderError naming the new leader", err)
	}
	if got := old.node.Members(); len(got) != 3 {
		t.Fatalf("the leader removed itself before handing off: members %v", got)
	}
	// As a client does, ask whoever leads now: on a loaded machine the
	// new leader may lose its term to an election before it is asked
	// (another voter, or the old leader again, which hands off again).
	to := c.nodes[nl.LeaderID]
	wait.For(t, "a leader to remove the old one", func() bool {
		err := to.node.RemoveMember(ctxT(t), old.id)
		if errors.As(err, &nl) {
			to = c.leader()
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true
	})
	wait.For(t, "the old leader to stop", func() bool {
		return errors.Is(old.node.Failure(), ErrRemoved)
	})
}
