package raft

import (
	"fmt"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLeaderNoticesFollowerDataLoss: a follower whose data directory is
// wiped and which starts again as a new member rejects the leader's
// appends with a log that ends below what it acknowledged; the leader
// counts it (and logs it as an error). A follower that only restarts is
// not counted.
func TestLeaderNoticesFollowerDataLoss(t *testing.T) {
	c := newCluster(t, 3, testConfig())
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
	// drops; the next append (a write) is what it rejects.
	if _, err := lead.node.Put(ctxT(t), []byte("after-wipe"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the leader to notice the follower's lost log", func() bool {
		if !lead.node.Status().IsLeader {
			t.Fatal("leadership moved; the test needs the same leader")
		}
		return lost() > 0
	})
}
