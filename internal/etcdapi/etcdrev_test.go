package etcdapi_test

import (
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvd-project/kvd/internal/etcdapi"
)

// TestRevisionsStartAtOneAsEtcds: an empty store answers at revision 1
// and its first write gets revision 2, as etcd's; reads, filters,
// compares, compactions and watches take revisions in that numbering.
func TestRevisionsStartAtOneAsEtcds(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, ctxFor(t, 30*time.Second)
	empty, err := c.Get(ctx, "k")
	if err != nil || empty.Header.Revision != 1 || len(empty.Kvs) != 0 {
		t.Fatalf("get on an empty store: %v, %v; want nothing at revision 1", empty, err)
	}
	if r, err := c.Get(ctx, "k", clientv3.WithRev(1)); err != nil || r.Header.Revision != 1 || len(r.Kvs) != 0 {
		t.Fatalf("get at revision 1 on an empty store: %v, %v; want nothing at revision 1", r, err)
	}
	if _, err := c.Compact(ctx, 1); err != rpctypes.ErrCompacted {
		t.Fatalf("compact to 1 (the empty store): %v, want ErrCompacted", err)
	}
	if rev := put(t, c, "k", "v"); rev != 2 {
		t.Fatalf("the first put's revision %d, want 2", rev)
	}
	wc := c.Watch(ctx, "k", clientv3.WithRev(1)) // replays the history
	if evs := collectEvents(t, wc, 1); evs[0].Kv.ModRevision != 2 || evs[0].Kv.CreateRevision != 2 || !evs[0].IsCreate() {
		t.Fatalf("watch from 1: %+v, want the create at 2", evs[0].Kv)
	}
	r, err := c.Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].CreateRevision != 2 || r.Kvs[0].ModRevision != 2 || r.Kvs[0].Version != 1 || r.Header.Revision != 2 {
		t.Fatalf("get k: %v, %v; want it created and modified at 2, version 1, at header revision 2", r, err)
	}
	for _, tc := range []struct {
		name  string
		opts  []clientv3.OpOption
		keys  int
		count int64
		want  error
	}{
		{"at 1: the empty store", []clientv3.OpOption{clientv3.WithRev(1)}, 0, 0, nil},
		{"at 2: the first write", []clientv3.OpOption{clientv3.WithRev(2)}, 1, 1, nil},
		{"at 3: the future", []clientv3.OpOption{clientv3.WithRev(3)}, 0, 0, rpctypes.ErrFutureRev},
		{"max mod 1: below every key", []clientv3.OpOption{clientv3.WithMaxModRev(1)}, 0, 1, nil},
		{"max create 1: below every key", []clientv3.OpOption{clientv3.WithMaxCreateRev(1)}, 0, 1, nil},
		{"max mod 2", []clientv3.OpOption{clientv3.WithMaxModRev(2)}, 1, 1, nil},
		{"min mod 1: no bound", []clientv3.OpOption{clientv3.WithMinModRev(1)}, 1, 1, nil},
		{"min mod 2", []clientv3.OpOption{clientv3.WithMinModRev(2)}, 1, 1, nil},
		{"min mod 3", []clientv3.OpOption{clientv3.WithMinModRev(3)}, 0, 1, nil},
		{"min create 3", []clientv3.OpOption{clientv3.WithMinCreateRev(3)}, 0, 1, nil},
	} {
		r, err := c.Get(ctx, "k", tc.opts...)
		switch {
		case err != tc.want:
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		case err == nil && (len(r.Kvs) != tc.keys || r.Count != tc.count):
			t.Errorf("%s: %d keys, count %d; want %d, %d", tc.name, len(r.Kvs), r.Count, tc.keys, tc.count)
		}
	}
	if r, err := c.Get(ctx, "k", clientv3.WithRev(1)); err != nil || r.Header.Revision != 2 {
		t.Errorf("get at 1: %v, %v; want an answer at the store's revision, 2", r, err)
	}
	if h, err := c.HashKV(ctx, e.addr, 1); err != nil || h.Hash != 0 || h.HashRevision != 1 || h.CompactRevision != 1 {
		t.Errorf("HashKV at 1: %v, %v; want the empty store's (hash 0) at 1", h, err)
	}
}

// TestRevisionComparesInEtcdsNumbering: a transaction compares create and
// mod revisions as etcd's, including against 1, which lies between an
// absent key's 0 and every live key's.
func TestRevisionComparesInEtcdsNumbering(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, ctxFor(t, 30*time.Second)
	put(t, c, "k", "v") // revision 2
	for _, tc := range []struct {
		name string
		cmp  clientv3.Cmp
		want bool
	}{
		{"create = 2", clientv3.Compare(clientv3.CreateRevision("k"), "=", 2), true},
		{"mod = 2", clientv3.Compare(clientv3.ModRevision("k"), "=", 2), true},
		{"mod < 3", clientv3.Compare(clientv3.ModRevision("k"), "<", 3), true},
		{"mod > 1", clientv3.Compare(clientv3.ModRevision("k"), ">", 1), true},
		{"create = 1", clientv3.Compare(clientv3.CreateRevision("k"), "=", 1), false},
		{"create != 1", clientv3.Compare(clientv3.CreateRevision("k"), "!=", 1), true},
		{"create < 1", clientv3.Compare(clientv3.CreateRevision("k"), "<", 1), false},
		{"missing: create = 0", clientv3.Compare(clientv3.CreateRevision("missing"), "=", 0), true},
		{"missing: create < 1", clientv3.Compare(clientv3.CreateRevision("missing"), "<", 1), true},
		{"missing: create = 1", clientv3.Compare(clientv3.CreateRevision("missing"), "=", 1), false},
		{"missing: mod != 1", clientv3.Compare(clientv3.ModRevision("missing"), "!=", 1), true},
		{"missing: mod > 1", clientv3.Compare(clientv3.ModRevision("missing"), ">", 1), false},
		{"missing: mod < 2", clientv3.Compare(clientv3.ModRevision("missing"), "<", 2), true},
	} {
		r, err := c.Txn(ctx).If(tc.cmp).Commit()
		if err != nil || r.Succeeded != tc.want {
			t.Errorf("%s: %v, %v; want succeeded %v", tc.name, r, err, tc.want)
		}
	}
}

// TestReadAtOneAfterCompactionIsCompacted: once the history is compacted
// past the empty store, a read at revision 1 fails as etcd's does.
func TestReadAtOneAfterCompactionIsCompacted(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, ctxFor(t, 30*time.Second)
	put(t, c, "a", "1")
	r2 := put(t, c, "b", "2")
	if _, err := c.Compact(ctx, r2); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int64{1, r2 - 1} {
		if _, err := c.Get(ctx, "a", clientv3.WithRev(rev)); !errors.Is(err, rpctypes.ErrCompacted) {
			t.Errorf("get at %d after compacting to %d: %v, want ErrCompacted", rev, r2, err)
		}
	}
	if r, err := c.Get(ctx, "a", clientv3.WithRev(r2)); err != nil || len(r.Kvs) != 1 {
		t.Errorf("get at the compaction revision %d: %v, %v", r2, r, err)
	}
}
