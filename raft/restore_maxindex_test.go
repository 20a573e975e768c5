package raft

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"
)

// TestRestoredClusterAtMaxIndexCommits: a cluster restored at any index
// RestoreConfig.Validate (and the backup reader) accept must then work.
// Both accepted up to maxPeerIndex, and at exactly maxPeerIndex it did not: the new leader's first entry is at
// maxPeerIndex+1, which every follower's peer filter drops (checkAppend:
// entries past maxPeerIndex), so a cluster of more than one node elects a
// leader and then commits nothing, ever: every write hangs until its
// deadline.
func TestRestoredClusterAtMaxIndexCommits(t *testing.T) {
	for _, index := range []uint64{100, maxPeerIndex / 2, maxPeerIndex} {
		t.Run(fmt.Sprint(index), func(t *testing.T) {
			probe := RestoreConfig{ID: 1, InitialCluster: map[uint64]string{1: "a:1"}, DataDir: "d", Index: index}
			if err := probe.Validate(); err != nil {
				t.Skipf("Restore refuses index %d: %v", index, err) // refused up front: fine
			}
			base := testConfig()
			base.InitialClusterToken = "restored"
			c := &cluster{t: t, dir: t.TempDir(), net: newMemNet(), base: base,
				peers: map[uint64]string{}, nodes: map[uint64]*testNode{}}
			t.Cleanup(c.stopAll)
			for id := uint64(1); id <= 3; id++ {
				c.reserve(id)
			}
			for id, tn := range c.nodes {
				cfg := RestoreConfig{ID: id, InitialCluster: maps.Clone(c.peers), InitialClusterToken: base.InitialClusterToken,
					DataDir: tn.dir, Index: index, Logger: testLogger()}
				if err := Restore(cfg, func(add func(key, value []byte, version uint64) error) error {
					return add([]byte("k"), []byte("v"), index)
				}); err != nil {
					t.Fatalf("restore node %d at %d: %v", id, index, err)
				}
			}
			for id := range c.peers {
				c.start(id, false)
			}
			lead := c.leader()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var err error
			for ctx.Err() == nil {
				var v uint64
				if v, err = c.leader().node.Put(ctx, []byte("new"), []byte("x")); err == nil {
					if v <= index {
						t.Fatalf("write after a restore at %d got version %d", index, v)
					}
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Fatalf("cluster restored at index %d (leader %d) commits no write: %v", index, lead.id, err)
		})
	}
}
