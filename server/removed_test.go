package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/raft"
)

// removedMessage is what a removed member says, as etcd's does.
const removedMessage = "the member has been permanently removed from the cluster"

// TestRemovedMemberServesNoStaleRead: once `member remove` of a node is
// acknowledged, no read at any level, through a client whose first
// endpoint is the removed node, returns a value older than a write
// acknowledged after the removal; the node stops with the removal as its
// failure, and its data directory refuses to start again. Without the
// farewell (raft/peer/removal.go) or the fence (Server.removeFence), the
// removed follower serves the value from before the removal at the
// serializable level for good; without the loop's own check (ready.go:
// stopRemoved), so does the removed leader.
func TestRemovedMemberServesNoStaleRead(t *testing.T) {
	for _, victim := range []string{"follower", "leader"} {
		t.Run(victim, func(t *testing.T) {
			testRemovedMember(t, victim == "leader")
		})
	}
}

func testRemovedMember(t *testing.T, removeLeader bool) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{TableMem: 1 << 20})
	lead := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	gone := lead
	if !removeLeader {
		gone = nodes[int(lead.ID)%3] // another node
	}
	var rest []*kvdtest.Node
	for _, n := range nodes {
		if n != gone {
			rest = append(rest, n)
		}
	}
	eps := append([]string{gone.Addr}, kvdtest.Endpoints(rest)...)
	ctx := context.Background()
	admin := newPatientClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	if err := admin.Put(ctx, []byte("k"), []byte("before")); err != nil {
		t.Fatal(err)
	}
	levels := []client.Consistency{client.Linearizable, client.Serializable, client.ReadIndex}
	readers := make([]*client.Client, len(levels))
	for i, l := range levels {
		readers[i] = newPatientClient(t, eps, l)
		// Every reader has read from the node to be removed (a connection,
		// its region's geometry, cached locations) before it is removed.
		wait.NoError(t, "read k=before", func() error {
			return expectValue(ctx, readers[i], "before")
		})
	}
	if err := admin.RemoveMember(ctx, gone.ID); err != nil {
		t.Fatalf("member remove %d: %v", gone.ID, err)
	}
	if err := admin.Put(ctx, []byte("k"), []byte("after")); err != nil {
		t.Fatalf("put after the removal: %v", err)
	}
	// Every read from now on sees k=after or fails; none sees k=before.
	readAll := func() {
		for i, c := range readers {
			for _, read := range []func() error{
				func() error { return expectValue(ctx, c, "after") },
				func() error { return expectScan(ctx, c, levels[i], "after") },
			} {
				if err := read(); err != nil && strings.Contains(err.Error(), "stale") {
					t.Fatalf("%v read through the removed node %d: %v", levels[i], gone.ID, err)
				}
			}
		}
	}
	wait.For(t, "the removed node to stop", func() bool {
		readAll()
		select {
		case <-gone.Srv.Failed():
			return true
		default:
			return false
		}
	})
	readAll()
	if err := gone.Srv.Failure(); !errors.Is(err, raft.ErrRemoved) || !strings.Contains(err.Error(), removedMessage) {
		t.Fatalf("removed node's failure: %v, want %q", err, removedMessage)
	}
	gone.Stop()
	if err := gone.Start(); !errors.Is(err, raft.ErrRemoved) || !strings.Contains(err.Error(), removedMessage) {
		gone.Stop()
		t.Fatalf("restart of the removed node: %v, want %q", err, removedMessage)
	}
}

// expectValue reads k through c and reports a value other than want as
// "stale".
func expectValue(ctx context.Context, c *client.Client, want string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := c.Get(ctx, []byte("k"))
	if err != nil {
		return err
	}
	if string(v) != want {
		return fmt.Errorf("stale value %q, want %q", v, want)
	}
	return nil
}

// expectScan reads k with a prefix scan at level through c, as
// expectValue does.
func expectScan(ctx context.Context, c *client.Client, level client.Consistency, want string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := c.Prefix(ctx, []byte("k"), client.WithConsistency(level))
	if err != nil {
		return err
	}
	if len(r.KVs) != 1 || string(r.KVs[0].Value) != want {
		return fmt.Errorf("stale scan %+v, want k=%q", r.KVs, want)
	}
	return nil
}
