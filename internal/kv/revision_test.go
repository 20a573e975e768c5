package kv

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft"
)

// metaState is a node's keys with their whole metadata, and its revision.
func metaState(t *testing.T, s *Store) (map[string]revision.Meta, uint64) {
	t.Helper()
	out := map[string]revision.Meta{}
	if err := s.ForEach(func(k, _ []byte, m revision.Meta) error { out[string(k)] = m; return nil }); err != nil {
		t.Fatal(err)
	}
	return out, s.Revision()
}

// TestRevisionDenseAndIdentical: every request that changes the state
// takes the next revision, those that change nothing (a delete of an
// absent key, a transaction that writes nothing, a lease grant) none; and
// every member holds the same revision and the same metadata, through a
// restart and a snapshot install.
func TestRevisionDenseAndIdentical(t *testing.T) {
	cfg := testConfig()
	cfg.Raft.SnapshotCount, cfg.Raft.SnapshotCatchUpEntries, cfg.Raft.SnapshotChunkSize = 20, 5, 512
	c := newCluster(t, 3, cfg)
	lead := c.leader()
	down := c.follower(lead)
	c.caughtUp(down)
	c.stop(down.id)
	lead = c.leader()
	ctx := ctxT(t)
	changes := uint64(0)
	step := func(what string, changed bool, rev uint64, err error) {
		t.Helper()
		if changed {
			changes++
		}
		if err != nil || rev != changes {
			t.Fatalf("%s: revision %d, %v; want %d", what, rev, err, changes)
		}
	}
	rev := c.put("a", "1")
	step("put a", true, rev, nil)
	_, rev, err := lead.node.Delete(ctx, []byte("absent"))
	step("delete of an absent key", false, rev, err)
	_, err = lead.node.Grant(ctx, 0, time.Minute)
	step("lease grant", false, lead.node.Revision(), err)
	resp, _, err := lead.node.Txn(ctx, &txn.Txn{Then: []txn.Op{{Type: txn.Get, Key: []byte("a")}}}, raft.Admission{})
	step("read-only transaction", false, resp.Revision, err)
	resp, _, err = lead.node.Txn(ctx, &txn.Txn{Then: []txn.Op{{Type: txn.Put, Key: []byte("a"), Value: []byte("2")}, {Type: txn.Put, Key: []byte("b"), Value: []byte("1")}}}, raft.Admission{})
	step("two-key transaction", true, resp.Revision, err)
	for i := range 40 {
		step("put", true, c.put(fmt.Sprintf("k%d", i%5), fmt.Sprint(i)), nil)
	}
	_, rev, err = lead.node.Delete(ctx, []byte("b"))
	step("delete", true, rev, err)
	back := c.start(down.id, false)
	c.caughtUp(back)
	if _, restores, _ := back.app.snapshot(); restores == 0 {
		t.Fatal("the follower caught up without installing a snapshot")
	}
	want, wantRev := metaState(t, lead.node)
	if a := want["a"]; a.Version != 2 || a.Create != 1 || a.Mod != 2 {
		t.Fatalf("a = %+v, want created at 1, version 2, modified at 2", a)
	}
	check := func(when string) {
		for _, tn := range c.running() {
			c.caughtUp(tn)
			wait.For(t, fmt.Sprintf("node %d %s to hold the leader's revisions", tn.id, when), func() bool {
				got, rev := metaState(t, tn.node)
				return rev == wantRev && maps.Equal(got, want)
			})
		}
	}
	check("after the snapshot install")
	c.stop(lead.id)
	c.start(lead.id, false)
	check("after a restart")
}
