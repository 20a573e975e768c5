package kv

import (
	"errors"
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
	lease, err := lead.node.Grant(ctx, 0, time.Minute)
	step("lease grant", false, lead.node.Revision(), err)
	resp, _, err := lead.node.Txn(ctx, &txn.Txn{Then: []txn.Op{{Type: txn.Get, Key: []byte("a")}}}, raft.Admission{})
	step("read-only transaction", false, resp.Revision, err)
	resp, _, err = lead.node.Txn(ctx, &txn.Txn{Then: []txn.Op{{Type: txn.Put, Key: []byte("a"), Value: []byte("2")}, {Type: txn.Put, Key: []byte("b"), Value: []byte("1")}}}, raft.Admission{})
	step("two-key transaction", true, resp.Revision, err)
	putBatch(t, lead.node, lease, step)
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
	if c := want["c"]; c.Version != 2 || c.Create != 3 || c.Mod != 4 {
		t.Fatalf("c = %+v, want created at 3, version 2, modified at 4 (two PUTs of a batch)", c)
	}
	if e := want["e"]; e.Lease != lease || e.Mod != 5 {
		t.Fatalf("e = %+v, want lease %d, modified at 5", e, lease)
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

// putBatch commits a batch of PUTs on lead and checks each PUT's outcome
// as step does a request's: each that applied took the next revision,
// in order (two of one key are two writes), and those refused when
// applied (a lease that does not exist, ignore_value of a missing key)
// failed alone, taking none.
func putBatch(t *testing.T, lead *Store, lease uint64, step func(string, bool, uint64, error)) {
	t.Helper()
	puts := []struct {
		op      txn.Op
		refused error
	}{
		{txn.Op{Type: txn.Put, Key: []byte("c"), Value: []byte("1")}, nil},
		{txn.Op{Type: txn.Put, Key: []byte("c"), Value: []byte("2")}, nil},
		{txn.Op{Type: txn.Put, Key: []byte("d"), Value: []byte("1"), Lease: lease + 1000}, txn.ErrLeaseNotFound},
		{txn.Op{Type: txn.Put, Key: []byte("e"), Value: []byte("1"), Lease: lease}, nil},
		{txn.Op{Type: txn.Put, Key: []byte("missing"), IgnoreValue: true}, txn.ErrKeyNotFound},
	}
	ops := make([]txn.Op, len(puts))
	for i, p := range puts {
		ops[i] = p.op
	}
	rs, err := lead.PutBatch(ctxT(t), ops, raft.Admission{})
	if err != nil || len(rs) != len(puts) {
		t.Fatalf("batch: %d results, %v; want %d", len(rs), err, len(puts))
	}
	for i, p := range puts {
		what := fmt.Sprintf("batch PUT %d of %s", i, p.op.Key)
		if p.refused != nil {
			if !errors.Is(rs[i].Err, p.refused) {
				t.Fatalf("%s: %v, want %v", what, rs[i].Err, p.refused)
			}
			step(what, false, rs[i].Revision, nil)
			continue
		}
		step(what, true, rs[i].Revision, rs[i].Err)
	}
}
