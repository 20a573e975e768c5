package raft

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/raft/peer"
)

// TestLeaderNoticesFollowerDataLoss: a follower whose data directory is
// wiped and which starts again as a new member rejects the leader's
// appends with a log that ends below what it acknowledged; the leader
// counts it (and logs it as an error). A follower that only restarts is
// not counted.
func TestLeaderNoticesFollowerDataLoss(t *testing.T) {
	cfg := testConfig()
	cfg.ElectionTicks = 50 // the test needs one leader throughout: 1 s, not 0.2
	c := newCluster(t, 3, cfg)
	lead := c.leader()
	f := c.follower(lead)
	for i := range 20 {
		c.put(fmt.Sprintf("k%d", i), "v")
	}
	c.caughtUp(f)
	lost := func() float64 { return testutil.ToFloat64(lead.node.metrics.followerDataLost) }

	// A restart with its data: nothing lost.
	c.stop(f.id)
	f = c.start(f.id, false)
	c.put("after-restart", "v")
	c.caughtUp(f)
	if n := lost(); n != 0 {
		t.Fatalf("a follower restarted with its data counted as losing it (%v)", n)
	}

	// Wiped: it comes back with only the bootstrap entries. (It cannot catch
	// up under this leader: raft takes its rejections of the index it
	// acknowledged for stale ones. A new leader would start it from scratch.)
	c.stop(f.id)
	if err := os.RemoveAll(f.dir); err != nil {
		t.Fatal(err)
	}
	f = c.start(f.id, false)
	// The leader's heartbeats name a commit index beyond its log, which it
	// drops (and never answers); the appends the leader sends as writes come
	// are what it rejects. One sent before the leader's session to it is
	// back is lost, and leaves the leader waiting for an answer that never
	// comes: write once heartbeats arrive.
	wait.For(t, "the leader's heartbeats to reach the wiped follower", func() bool {
		return testutil.ToFloat64(f.node.metrics.peer.DroppedTotal.WithLabelValues(string(peer.DropBeyondLog))) > 0
	})
	wait.For(t, "the leader to notice the follower's lost log", func() bool {
		if !lead.node.Status().IsLeader {
			t.Fatal("leadership moved; the test needs the same leader")
		}
		if lost() > 0 {
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		lead.node.Put(ctx, []byte("after-wipe"), []byte("v"))
		return false
	})
}
