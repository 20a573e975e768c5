package etcdapi_test

// client/v3/kubernetes, unmodified, as Kubernetes' apiserver uses it: the
// expectations are etcd's (the Interface's documentation, and its
// server's Range and Txn semantics they rest on).

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"

	"github.com/kvd-project/kvd/internal/etcdapi"
)

// kube is the Kubernetes interface over e's clientv3 client.
func kube(c *clientv3.Client) kubernetes.Interface { return kubernetes.Client{Client: c} }

// againstKvdAndEtcd runs f against kvd's etcd API (one node, fresh) and
// against a real etcd (Debian's 3.4 server, bin/etcd from
// scripts/deps.sh), fresh too: what kvd answers is what etcd answers.
func againstKvdAndEtcd(t *testing.T, f func(t *testing.T, c *clientv3.Client)) {
	t.Run("kvd", func(t *testing.T) { f(t, start(t, 1, etcdapi.Config{}).etcd) })
	t.Run("etcd", func(t *testing.T) { f(t, startEtcd(t)) })
}

// TestKubernetesOptimisticPutAndDelete: create with expected revision 0,
// update with the right and a stale revision, delete likewise; a refused
// write changes nothing and (GetOnFailure) returns the object as it is.
func TestKubernetesOptimisticPutAndDelete(t *testing.T) { againstKvdAndEtcd(t, kubeOptimisticWrites) }

func kubeOptimisticWrites(t *testing.T, c *clientv3.Client) {
	k := kube(c)
	ctx := t.Context()
	const key = "/registry/pods/default/p"
	created, err := k.OptimisticPut(ctx, key, []byte("v1"), 0, kubernetes.PutOptions{})
	if err != nil || !created.Succeeded {
		t.Fatalf("create with expected revision 0: %+v, %v", created, err)
	}
	got, err := k.Get(ctx, key, kubernetes.GetOptions{})
	if err != nil || got.KV == nil || got.KV.ModRevision != created.Revision || got.KV.CreateRevision != created.Revision || string(got.KV.Value) != "v1" {
		t.Fatalf("get after create at %d: %+v, %v; want v1 created and modified at the put's revision", created.Revision, got, err)
	}
	tests := []struct {
		name     string
		expected int64
		value    string
		want     bool
	}{
		{"create again", 0, "v0", false},
		{"stale revision", created.Revision - 1, "stale", false},
		{"future revision", created.Revision + 1, "future", false},
		{"current revision", created.Revision, "v2", true},
		{"the revision replaced", created.Revision, "v3", false},
	}
	cur := got.KV
	for _, tc := range tests {
		r, err := k.OptimisticPut(ctx, key, []byte(tc.value), tc.expected, kubernetes.PutOptions{GetOnFailure: true})
		if err != nil || r.Succeeded != tc.want {
			t.Fatalf("%s: %+v, %v; want succeeded %v", tc.name, r, err, tc.want)
		}
		if tc.want {
			cur = &mvccpb.KeyValue{Key: []byte(key), Value: []byte(tc.value), CreateRevision: cur.CreateRevision,
				ModRevision: r.Revision, Version: cur.Version + 1}
			continue
		}
		if r.KV == nil || !sameKV(r.KV, cur) {
			t.Fatalf("%s: refused put returned %v, want the object as it is, %v", tc.name, r.KV, cur)
		}
	}
	if r, err := k.OptimisticDelete(ctx, key, created.Revision, kubernetes.DeleteOptions{GetOnFailure: true}); err != nil || r.Succeeded || !sameKV(r.KV, cur) {
		t.Fatalf("delete at a stale revision: %+v, %v; want refused with %v", r, err, cur)
	}
	del, err := k.OptimisticDelete(ctx, key, cur.ModRevision, kubernetes.DeleteOptions{})
	if err != nil || !del.Succeeded || del.Revision != cur.ModRevision+1 {
		t.Fatalf("delete at the current revision %d: %+v, %v", cur.ModRevision, del, err)
	}
	if got, err := k.Get(ctx, key, kubernetes.GetOptions{}); err != nil || got.KV != nil || got.Revision != del.Revision {
		t.Fatalf("get after delete: %+v, %v; want no object at revision %d", got, err, del.Revision)
	}
	if got, err := k.Get(ctx, key, kubernetes.GetOptions{Revision: del.Revision - 1}); err != nil || !sameKV(got.KV, cur) {
		t.Fatalf("get at the revision before the delete: %+v, %v; want %v", got, err, cur)
	}
	if r, err := k.OptimisticDelete(ctx, key, cur.ModRevision, kubernetes.DeleteOptions{GetOnFailure: true}); err != nil || r.Succeeded || r.KV != nil {
		t.Fatalf("delete of a deleted object: %+v, %v; want refused, no object", r, err)
	}
	if r, err := k.OptimisticPut(ctx, key, []byte("again"), 0, kubernetes.PutOptions{}); err != nil || !r.Succeeded {
		t.Fatalf("create after delete: %+v, %v", r, err)
	}
}

// sameKV compares what the apiserver reads of an object.
func sameKV(a, b *mvccpb.KeyValue) bool {
	return a != nil && b != nil && string(a.Key) == string(b.Key) && string(a.Value) == string(b.Value) &&
		a.CreateRevision == b.CreateRevision && a.ModRevision == b.ModRevision && a.Version == b.Version
}

// TestKubernetesListPagesAtOneRevision pages through a prefix with limit
// and continue at the first page's revision, as the apiserver does, while
// the prefix changes between pages: the pages together are the prefix as
// it was at that revision, each Count is the keys from the page's start
// to the prefix's end (the apiserver's remainingItemCount is Count minus
// the page), and keys just outside the prefix are never listed.
func TestKubernetesListPagesAtOneRevision(t *testing.T) { againstKvdAndEtcd(t, kubeListPages) }

func kubeListPages(t *testing.T, c *clientv3.Client) {
	k := kube(c)
	ctx := t.Context()
	const prefix = "/registry/pods/"
	for _, outside := range []string{"/registry/pods", "/registry/pods0", "/registry/podt/x"} {
		put(t, c, outside, "outside")
	}
	var want []string
	for i := range 10 {
		key := fmt.Sprintf("%sns/p%02d", prefix, i)
		put(t, c, key, "v")
		want = append(want, key)
	}
	first, err := k.List(ctx, prefix, kubernetes.ListOptions{Limit: 3})
	if err != nil || len(first.Kvs) != 3 || first.Count != 10 {
		t.Fatalf("first page: %d keys, count %d, %v; want 3 of 10", len(first.Kvs), first.Count, err)
	}
	rev := first.Revision
	got := keysOf(first.Kvs)
	last := first
	for page := 1; len(got) < 10; page++ {
		// Changes the pages must not see.
		put(t, c, fmt.Sprintf("%sns/p%02d", prefix, 9-page), "changed")
		put(t, c, fmt.Sprintf("%sns/new%02d", prefix, page), "new")
		if _, err := c.Delete(ctx, want[len(want)-page]); err != nil {
			t.Fatal(err)
		}
		cont := string(last.Kvs[len(last.Kvs)-1].Key) + "\x00"
		r, err := k.List(ctx, prefix, kubernetes.ListOptions{Revision: rev, Limit: 3, Continue: cont})
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if r.Revision < rev || r.Count != int64(10-len(got)) || len(r.Kvs) == 0 || len(r.Kvs) > 3 {
			t.Fatalf("page %d at revision %d: %d keys, count %d, header revision %d; want count %d",
				page, rev, len(r.Kvs), r.Count, r.Revision, 10-len(got))
		}
		for _, kv := range r.Kvs {
			if string(kv.Value) != "v" || kv.ModRevision > rev {
				t.Fatalf("page %d at revision %d shows %s=%s modified at %d", page, rev, kv.Key, kv.Value, kv.ModRevision)
			}
		}
		got = append(got, keysOf(r.Kvs)...)
		last = r
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages at revision %d: %v, want %v", rev, got, want)
	}
	now, err := k.List(ctx, prefix, kubernetes.ListOptions{})
	if err != nil || now.Revision <= rev || now.Count != int64(len(now.Kvs)) || slices.Equal(keysOf(now.Kvs), want) {
		t.Fatalf("list now: %d keys, count %d at %d, %v; want the changed prefix past %d", len(now.Kvs), now.Count, now.Revision, err, rev)
	}
	n, err := k.Count(ctx, prefix, kubernetes.CountOptions{})
	if err != nil || n != int64(len(now.Kvs)) {
		t.Fatalf("count: %d, %v; want %d", n, err, len(now.Kvs))
	}
}

// TestKubernetesReadsAtCompactedAndFutureRevisions: a Get or List below
// the compaction fails with etcd's ErrCompacted (the apiserver relists on
// it), one past the store's revision with ErrFutureRev.
func TestKubernetesReadsAtCompactedAndFutureRevisions(t *testing.T) {
	againstKvdAndEtcd(t, kubeReadsAtRevisions)
}

func kubeReadsAtRevisions(t *testing.T, c *clientv3.Client) {
	k := kube(c)
	ctx := t.Context()
	old := put(t, c, "/registry/a/x", "1")
	cur := put(t, c, "/registry/a/x", "2")
	if _, err := c.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		rev  int64
		want error
	}{
		{"compacted", old, rpctypes.ErrCompacted},
		{"future", cur + 100, rpctypes.ErrFutureRev},
		{"compaction revision", cur, nil},
	}
	for _, tc := range tests {
		_, gerr := k.Get(ctx, "/registry/a/x", kubernetes.GetOptions{Revision: tc.rev})
		_, lerr := k.List(ctx, "/registry/a/", kubernetes.ListOptions{Revision: tc.rev, Limit: 1})
		for _, err := range []error{gerr, lerr} {
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(rpctypes.Error(err), tc.want) {
				t.Errorf("%s read at %d: %v, want %v", tc.name, tc.rev, err, tc.want)
			}
		}
	}
}
