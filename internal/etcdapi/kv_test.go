package etcdapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/etcdapi"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/limits"
)

// put writes key=value through etcd's API and returns the write's
// revision (its header's).
func put(t *testing.T, c *clientv3.Client, key, value string, opts ...clientv3.OpOption) int64 {
	t.Helper()
	r, err := c.Put(context.Background(), key, value, opts...)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return r.Header.Revision
}

// keysOf is the keys of kvs, in order.
func keysOf(kvs []*mvccpb.KeyValue) []string {
	out := []string{}
	for _, kv := range kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// TestRangeOptions: etcd's Range options through clientv3, each with the
// keys etcd returns, the count of the whole range and more.
func TestRangeOptions(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c := e.etcd
	ra := put(t, c, "a", "1")
	rb := put(t, c, "b", "22")
	rc := put(t, c, "c", "3")
	rb2 := put(t, c, "b", "0") // b: version 2, created at rb
	rd := put(t, c, "d", "4")
	put(t, c, "e/x", "5")
	rey := put(t, c, "e/y", "6")
	all := []string{"a", "b", "c", "d", "e/x", "e/y"}
	for _, tc := range []struct {
		name  string
		key   string
		opts  []clientv3.OpOption
		want  []string
		count int64
		more  bool
	}{
		{"one key", "a", nil, []string{"a"}, 1, false},
		{"missing key", "zz", nil, []string{}, 0, false},
		{"range", "a", []clientv3.OpOption{clientv3.WithRange("c")}, []string{"a", "b"}, 2, false},
		{"end before key", "c", []clientv3.OpOption{clientv3.WithRange("a")}, []string{}, 0, false},
		{"from key", "c", []clientv3.OpOption{clientv3.WithFromKey()}, []string{"c", "d", "e/x", "e/y"}, 4, false},
		{"every key", "", []clientv3.OpOption{clientv3.WithPrefix()}, all, 6, false},
		{"prefix", "e/", []clientv3.OpOption{clientv3.WithPrefix()}, []string{"e/x", "e/y"}, 2, false},
		{"limit", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithLimit(2)}, []string{"a", "b"}, 6, true},
		{"limit of all", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithLimit(6)}, all, 6, false},
		{"key descending", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithLimit(2), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)},
			[]string{"e/y", "e/x"}, 6, true},
		{"key ascending", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}, all, 6, false},
		{"mod revision, no order: ascending", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortNone)},
			[]string{"a", "c", "b", "d", "e/x", "e/y"}, 6, false},
		{"mod revision descending", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend)},
			[]string{"e/y", "e/x", "d", "b", "c", "a"}, 6, false},
		{"create revision descending, limit", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithLimit(3), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)},
			[]string{"e/y", "e/x", "d"}, 6, true},
		{"value ascending", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithSort(clientv3.SortByValue, clientv3.SortAscend)},
			[]string{"b", "a", "c", "d", "e/x", "e/y"}, 6, false},
		{"version descending, limit", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithLimit(1), clientv3.WithSort(clientv3.SortByVersion, clientv3.SortDescend)},
			[]string{"b"}, 6, true},
		{"count only", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithCountOnly()}, []string{}, 6, false},
		{"count only ignores the limit", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithCountOnly(), clientv3.WithLimit(1)}, []string{}, 6, false},
		{"min mod revision", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithMinModRev(rb2)}, []string{"b", "d", "e/x", "e/y"}, 6, false},
		{"max mod revision", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithMaxModRev(rc)}, []string{"a", "c"}, 6, false},
		{"create revisions between", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithMinCreateRev(rb), clientv3.WithMaxCreateRev(rc)}, []string{"b", "c"}, 6, false},
		{"filter and limit", "a", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithMinCreateRev(rd), clientv3.WithLimit(1)}, []string{"d"}, 6, true},
		{"serializable", "a", []clientv3.OpOption{clientv3.WithSerializable()}, []string{"a"}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Get(context.Background(), tc.key, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := keysOf(r.Kvs); !slices.Equal(got, tc.want) || r.Count != tc.count || r.More != tc.more {
				t.Fatalf("keys %q, count %d, more %v; want %q, %d, %v", got, r.Count, r.More, tc.want, tc.count, tc.more)
			}
			if r.Header.Revision != rey {
				t.Fatalf("header revision %d, want the store's %d", r.Header.Revision, rey)
			}
		})
	}
	// The key-value fields, as etcd gives them; keys-only leaves the value out.
	r, err := c.Get(context.Background(), "b")
	want := &mvccpb.KeyValue{Key: []byte("b"), Value: []byte("0"), CreateRevision: rb, ModRevision: rb2, Version: 2}
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].String() != want.String() {
		t.Fatalf("get b: %v, %v; want %v", r, err, want)
	}
	r, err = c.Get(context.Background(), "a", clientv3.WithKeysOnly())
	want = &mvccpb.KeyValue{Key: []byte("a"), CreateRevision: ra, ModRevision: ra, Version: 1}
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].String() != want.String() {
		t.Fatalf("get a --keys-only: %v, %v; want %v", r, err, want)
	}
}

// TestRangeRefusesWhatEtcdRefuses: an empty key and an unknown sort give
// etcd's errors.
func TestRangeRefusesWhatEtcdRefuses(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	kv := pb.NewKVClient(e.etcd.ActiveConnection())
	for _, tc := range []struct {
		name string
		req  *pb.RangeRequest
		want error
	}{
		{"empty key", &pb.RangeRequest{}, rpctypes.ErrEmptyKey},
		{"unknown sort order", &pb.RangeRequest{Key: []byte("a"), SortOrder: 7}, rpctypes.ErrInvalidSortOption},
		{"unknown sort target", &pb.RangeRequest{Key: []byte("a"), SortTarget: 9}, rpctypes.ErrInvalidSortOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := kv.Range(context.Background(), tc.req); rpctypes.Error(err) != tc.want {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			if _, err := kv.Txn(context.Background(), &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: tc.req}}}}); rpctypes.Error(err) != tc.want {
				t.Fatalf("in a txn: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestPastRevisionsAndCompaction: a read at a past revision sees the key
// as it was then; compaction makes it fail with etcd's ErrCompacted, and
// a revision past the store's fails with ErrFutureRev.
func TestPastRevisionsAndCompaction(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, context.Background()
	r1 := put(t, c, "k", "v1")
	r2 := put(t, c, "k", "v2")
	r, err := c.Get(ctx, "k", clientv3.WithRev(r1))
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v1" || r.Header.Revision != r2 {
		t.Fatalf("get k at %d: %v, %v; want v1 under the store's revision %d", r1, r, err, r2)
	}
	if _, err := c.Get(ctx, "k", clientv3.WithRev(r2+10)); err != rpctypes.ErrFutureRev {
		t.Fatalf("get at a future revision: %v, want ErrFutureRev", err)
	}
	cr, err := c.Compact(ctx, r2)
	if err != nil || cr.Header.Revision != r2 {
		t.Fatalf("compact to %d: %v, %v", r2, cr, err)
	}
	for _, tc := range []struct {
		name string
		run  func() error
		want error
	}{
		{"get below the compaction", func() error { _, err := c.Get(ctx, "k", clientv3.WithRev(r1)); return err }, rpctypes.ErrCompacted},
		{"compact again", func() error { _, err := c.Compact(ctx, r2); return err }, rpctypes.ErrCompacted},
		{"compact below", func() error { _, err := c.Compact(ctx, r1); return err }, rpctypes.ErrCompacted},
		{"compact to 0", func() error { _, err := c.Compact(ctx, 0); return err }, rpctypes.ErrCompacted},
		{"compact to the future", func() error { _, err := c.Compact(ctx, r2+10); return err }, rpctypes.ErrFutureRev},
		{"get at the compaction", func() error { _, err := c.Get(ctx, "k", clientv3.WithRev(r2)); return err }, nil},
	} {
		if err := tc.run(); err != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	r3 := put(t, c, "k", "v3")
	if _, err := c.Compact(ctx, r3, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("physical compaction: %v", err)
	}
	if _, err := c.Get(ctx, "k", clientv3.WithRev(r2)); err != rpctypes.ErrCompacted {
		t.Fatalf("get below a physical compaction: %v, want ErrCompacted", err)
	}
}

// TestPutOptions: prev_kv, lease, ignore_value and ignore_lease, with
// etcd's answers and errors.
func TestPutOptions(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, context.Background()
	id, err := e.kvd.Grant(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lease := clientv3.LeaseID(id)
	r1 := put(t, c, "k", "v1")
	get := func(key string) *mvccpb.KeyValue {
		t.Helper()
		r, err := c.Get(ctx, key)
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("get %s: %v, %v", key, r, err)
		}
		return r.Kvs[0]
	}
	pr, err := c.Put(ctx, "k", "v2", clientv3.WithPrevKV())
	if err != nil || pr.PrevKv == nil || string(pr.PrevKv.Value) != "v1" || pr.PrevKv.ModRevision != r1 || get("k").ModRevision != pr.Header.Revision {
		t.Fatalf("put --prev-kv: %v, %v; want v1 at %d, and k's mod revision the header's", pr, err, r1)
	}
	if pr, err := c.Put(ctx, "new", "v", clientv3.WithPrevKV()); err != nil || pr.PrevKv != nil {
		t.Fatalf("put --prev-kv of a new key: %v, %v; want no prev_kv", pr, err)
	}
	pr, err = c.Put(ctx, "k", "v3", clientv3.WithLease(lease), clientv3.WithPrevKV())
	if kv := get("k"); err != nil || pr.PrevKv == nil || string(pr.PrevKv.Value) != "v2" || kv.Lease != int64(lease) || kv.ModRevision != pr.Header.Revision {
		t.Fatalf("put --lease --prev-kv: %v, %v; k %v", pr, err, kv)
	}
	if _, err := c.Put(ctx, "k", "", clientv3.WithIgnoreValue()); err != nil {
		t.Fatal(err)
	}
	if kv := get("k"); string(kv.Value) != "v3" || kv.Version != 4 || kv.Lease != 0 {
		t.Fatalf("put --ignore-value: k %v; want v3 at version 4, off its lease (etcd: a put without a lease detaches)", kv)
	}
	put(t, c, "k", "v4", clientv3.WithLease(lease))
	put(t, c, "k", "v5", clientv3.WithIgnoreLease())
	if kv := get("k"); string(kv.Value) != "v5" || kv.Lease != int64(lease) {
		t.Fatalf("put --ignore-lease: k %v; want v5 on lease %x", kv, lease)
	}
	for _, tc := range []struct {
		name       string
		key, value string
		opts       []clientv3.OpOption
		want       error
	}{
		{"empty key", "", "v", nil, rpctypes.ErrEmptyKey},
		{"ignore_value with a value", "k", "v", []clientv3.OpOption{clientv3.WithIgnoreValue()}, rpctypes.ErrValueProvided},
		{"ignore_lease with a lease", "k", "v", []clientv3.OpOption{clientv3.WithIgnoreLease(), clientv3.WithLease(lease)}, rpctypes.ErrLeaseProvided},
		{"ignore_value on a missing key", "missing", "", []clientv3.OpOption{clientv3.WithIgnoreValue()}, rpctypes.ErrKeyNotFound},
		{"ignore_lease on a missing key", "missing", "v", []clientv3.OpOption{clientv3.WithIgnoreLease()}, rpctypes.ErrKeyNotFound},
		{"ignore_value, prev_kv, missing key", "missing", "", []clientv3.OpOption{clientv3.WithIgnoreValue(), clientv3.WithPrevKV()}, rpctypes.ErrKeyNotFound},
		{"unknown lease", "k", "v", []clientv3.OpOption{clientv3.WithLease(lease + 1)}, rpctypes.ErrLeaseNotFound},
		{"unknown lease, prev_kv", "k", "v", []clientv3.OpOption{clientv3.WithLease(lease + 1), clientv3.WithPrevKV()}, rpctypes.ErrLeaseNotFound},
		{"key too long", strings.Repeat("k", limits.MaxKey+1), "v", nil, rpctypes.ErrRequestTooLarge},
		{"value too long", "k", strings.Repeat("v", limits.MaxValue+1), nil, rpctypes.ErrRequestTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Put(ctx, tc.key, tc.value, tc.opts...); err != tc.want {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	// The longest key works, read alone too.
	long := strings.Repeat("\xff", limits.MaxKey)
	put(t, c, long, "v")
	if kv := get(long); string(kv.Value) != "v" {
		t.Fatalf("the longest key: %v", kv)
	}
	if r, err := c.Delete(ctx, long); err != nil || r.Deleted != 1 {
		t.Fatalf("delete the longest key: %v, %v", r, err)
	}
}

// TestRequestTooLarge: a request past MaxRequestBytes, and one within it
// but past what kvd's transactions hold, fail with etcd's "request is too
// large"; only the first is a refusal of the size check.
func TestRequestTooLarge(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, context.Background()
	big := strings.Repeat("v", etcdapi.DefaultMaxRequestBytes/2+1)
	if _, err := c.Txn(ctx).Then(clientv3.OpPut("a", big), clientv3.OpPut("b", big)).Commit(); err != rpctypes.ErrRequestTooLarge {
		t.Fatalf("a txn past MaxRequestBytes: %v, want ErrRequestTooLarge", err)
	}
	if n := e.srv.Refusals(); n != 1 {
		t.Fatalf("%d refusals counted, want 1", n)
	}
	half := strings.Repeat("v", limits.MaxTxnBytes/2+1)
	if _, err := c.Txn(ctx).Then(clientv3.OpPut("a", half), clientv3.OpPut("b", half)).Commit(); err != rpctypes.ErrRequestTooLarge {
		t.Fatalf("a txn past kvd's transaction bound: %v, want ErrRequestTooLarge", err)
	}
	if n := e.srv.Refusals(); n != 1 {
		t.Fatalf("%d refusals counted, want still 1", n)
	}
}

// TestDeleteRange: a key, a range, a prefix and every key from one on,
// with the count deleted and prev_kv.
func TestDeleteRange(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, context.Background()
	for _, k := range []string{"a", "b", "c", "d", "p/1", "p/2", "q", "r"} {
		put(t, c, k, "v"+k)
	}
	for _, tc := range []struct {
		name    string
		key     string
		opts    []clientv3.OpOption
		deleted int64
		prev    []string
	}{
		{"missing key", "zz", nil, 0, nil},
		{"one key", "a", []clientv3.OpOption{clientv3.WithPrevKV()}, 1, []string{"a"}},
		{"range", "b", []clientv3.OpOption{clientv3.WithRange("d")}, 2, nil},
		{"prefix", "p/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV()}, 2, []string{"p/1", "p/2"}},
		{"from key", "q", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithPrevKV()}, 2, []string{"q", "r"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := c.Get(ctx, "d")
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.Delete(ctx, tc.key, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if r.Deleted != tc.deleted || !slices.Equal(keysOf(r.PrevKvs), append([]string{}, tc.prev...)) {
				t.Fatalf("deleted %d, prev %q; want %d, %q", r.Deleted, keysOf(r.PrevKvs), tc.deleted, tc.prev)
			}
			for _, kv := range r.PrevKvs {
				if string(kv.Value) != "v"+string(kv.Key) {
					t.Fatalf("prev_kv %v", kv)
				}
			}
			want := before.Header.Revision
			if tc.deleted > 0 {
				want++
			}
			if r.Header.Revision != want {
				t.Fatalf("header revision %d, want %d", r.Header.Revision, want)
			}
		})
	}
	if r, err := c.Get(ctx, "", clientv3.WithPrefix()); err != nil || !slices.Equal(keysOf(r.Kvs), []string{"d"}) {
		t.Fatalf("left: %v, %v; want d", r, err)
	}
	if _, err := c.Delete(ctx, ""); err != rpctypes.ErrEmptyKey {
		t.Fatalf("delete of the empty key: %v, want ErrEmptyKey", err)
	}
}

// TestTxnCompares: each compare target with each operator, on a key, a
// missing key and a range, decides the branch as in etcd.
func TestTxnCompares(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, context.Background()
	rk := put(t, c, "k", "v")
	rk2 := put(t, c, "k", "v") // version 2
	put(t, c, "p/1", "x")
	put(t, c, "p/2", "y")
	for _, tc := range []struct {
		name string
		cmp  clientv3.Cmp
		want bool
	}{
		{"version =", clientv3.Compare(clientv3.Version("k"), "=", 2), true},
		{"version >", clientv3.Compare(clientv3.Version("k"), ">", 1), true},
		{"version <", clientv3.Compare(clientv3.Version("k"), "<", 2), false},
		{"version !=", clientv3.Compare(clientv3.Version("k"), "!=", 2), false},
		{"create =", clientv3.Compare(clientv3.CreateRevision("k"), "=", rk), true},
		{"create <", clientv3.Compare(clientv3.CreateRevision("k"), "<", rk), false},
		{"mod =", clientv3.Compare(clientv3.ModRevision("k"), "=", rk2), true},
		{"mod >", clientv3.Compare(clientv3.ModRevision("k"), ">", rk), true},
		{"value =", clientv3.Compare(clientv3.Value("k"), "=", "v"), true},
		{"value >", clientv3.Compare(clientv3.Value("k"), ">", "u"), true},
		{"value <", clientv3.Compare(clientv3.Value("k"), "<", "u"), false},
		{"value != ", clientv3.Compare(clientv3.Value("k"), "!=", "v"), false},
		{"lease = 0", clientv3.Compare(clientv3.LeaseValue("k"), "=", 0), true},
		{"lease != 0", clientv3.Compare(clientv3.LeaseValue("k"), "!=", 0), false},
		{"missing key: value", clientv3.Compare(clientv3.Value("missing"), "=", ""), false},
		{"missing key: version 0", clientv3.Compare(clientv3.Version("missing"), "=", 0), true},
		{"missing key: create 0", clientv3.Compare(clientv3.CreateRevision("missing"), "=", 0), true},
		{"prefix: every version 1", clientv3.Compare(clientv3.Version("p/"), "=", 1).WithPrefix(), true},
		{"prefix: a value differs", clientv3.Compare(clientv3.Value("p/"), "=", "x").WithPrefix(), false},
		{"range: every value below z", clientv3.Compare(clientv3.Value("p/1"), "<", "z").WithRange("p/3"), true},
		{"from key, no keys: absent", clientv3.Compare(clientv3.CreateRevision("q"), "=", 0).WithRange("\x00"), true},
		{"from key: some exist", clientv3.Compare(clientv3.CreateRevision("k"), "=", 0).WithRange("\x00"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Txn(ctx).If(tc.cmp).Commit()
			if err != nil || r.Succeeded != tc.want {
				t.Fatalf("%v, %v; want succeeded %v", r, err, tc.want)
			}
		})
	}
}

// TestTxnNested: a transaction with each kind of operation and a nested
// transaction, its responses mapped back in order; the failure branch.
func TestTxnNested(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, context.Background()
	put(t, c, "k", "v")
	ra := put(t, c, "a", "0")
	put(t, c, "p/1", "x")
	put(t, c, "p/2", "y")
	r, err := c.Txn(ctx).If(clientv3.Compare(clientv3.Value("k"), "=", "v")).Then(
		clientv3.OpPut("a", "1", clientv3.WithPrevKV()),
		clientv3.OpGet("p/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpDelete("p/1", clientv3.WithPrevKV()),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Version("p/1"), "=", 0)},
			[]clientv3.Op{clientv3.OpPut("n", "x"), clientv3.OpGet("p/", clientv3.WithPrefix())},
			[]clientv3.Op{clientv3.OpPut("n", "wrong")}),
		clientv3.OpGet("a", clientv3.WithRange("o"), clientv3.WithLimit(1)),
		clientv3.OpPut("b", "1", clientv3.WithPrevKV()),
	).Else(clientv3.OpGet("k")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Succeeded || len(r.Responses) != 6 {
		t.Fatalf("txn: %v", r)
	}
	rev := r.Header.Revision
	put0 := r.Responses[0].GetResponsePut()
	count := r.Responses[1].GetResponseRange()
	del := r.Responses[2].GetResponseDeleteRange()
	nested := r.Responses[3].GetResponseTxn()
	rng := r.Responses[4].GetResponseRange()
	put5 := r.Responses[5].GetResponsePut()
	switch {
	case put0 == nil || put0.PrevKv == nil || string(put0.PrevKv.Value) != "0" || put0.PrevKv.ModRevision != ra:
		t.Fatalf("put a with prev_kv: %v", put0)
	case count == nil || count.Count != 2 || len(count.Kvs) != 0:
		t.Fatalf("count of p/: %v", count)
	case del == nil || del.Deleted != 1 || len(del.PrevKvs) != 1 || string(del.PrevKvs[0].Value) != "x":
		t.Fatalf("delete p/1: %v", del)
	case nested == nil || !nested.Succeeded || len(nested.Responses) != 2 ||
		!slices.Equal(keysOf(nested.Responses[1].GetResponseRange().GetKvs()), []string{"p/2"}):
		t.Fatalf("nested txn: %v", nested)
	case rng == nil || !slices.Equal(keysOf(rng.Kvs), []string{"a"}) || string(rng.Kvs[0].Value) != "1" || rng.Count != 3 || !rng.More:
		t.Fatalf("range [a, o) limit 1: %v; want a=1 of a, k, n", rng)
	case put5 == nil || put5.PrevKv != nil:
		t.Fatalf("put of a new key with prev_kv: %v", put5)
	}
	for _, key := range []string{"a", "n", "b"} {
		g, err := c.Get(ctx, key)
		if err != nil || len(g.Kvs) != 1 || g.Kvs[0].ModRevision != rev {
			t.Fatalf("get %s: %v, %v; want written at the txn's revision %d", key, g, err, rev)
		}
	}
	r, err = c.Txn(ctx).If(clientv3.Compare(clientv3.Value("k"), "=", "w")).Then(clientv3.OpPut("k", "w")).Else(clientv3.OpGet("k")).Commit()
	if err != nil || r.Succeeded || len(r.Responses) != 1 || string(r.Responses[0].GetResponseRange().GetKvs()[0].Value) != "v" {
		t.Fatalf("failure branch: %v, %v", r, err)
	}
	if r.Header.Revision != rev {
		t.Fatalf("a txn that writes nothing: header revision %d, want %d", r.Header.Revision, rev)
	}
}

// TestTxnInnerHeadersAreEtcds: as etcd's, a transaction's whole answer
// has the full header, each range, put and delete in it a header of only
// the revision, a nested transaction an empty one.
func TestTxnInnerHeadersAreEtcds(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	put(t, e.etcd, "k", "v")
	r, err := e.etcd.Txn(context.Background()).Then(
		clientv3.OpPut("a", "1"), clientv3.OpGet("k"), clientv3.OpDelete("k"),
		clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpGet("a")}, nil),
	).Commit()
	if err != nil || len(r.Responses) != 4 {
		t.Fatalf("txn: %v, %v", r, err)
	}
	onlyRev := &pb.ResponseHeader{Revision: r.Header.Revision}
	nested := r.Responses[3].GetResponseTxn()
	for _, c := range []struct {
		what      string
		got, want *pb.ResponseHeader
	}{
		{"put", r.Responses[0].GetResponsePut().GetHeader(), onlyRev},
		{"range", r.Responses[1].GetResponseRange().GetHeader(), onlyRev},
		{"delete", r.Responses[2].GetResponseDeleteRange().GetHeader(), onlyRev},
		{"nested txn", nested.GetHeader(), &pb.ResponseHeader{}},
		{"range in the nested txn", nested.GetResponses()[0].GetResponseRange().GetHeader(), onlyRev},
	} {
		if c.got == nil || !proto.Equal(c.got, c.want) {
			t.Errorf("%s's header %v, want %v", c.what, c.got, c.want)
		}
	}
}

// puts is n puts of distinct keys.
func puts(prefix string, n int) []clientv3.Op {
	ops := make([]clientv3.Op, n)
	for i := range ops {
		ops[i] = clientv3.OpPut(fmt.Sprintf("%s%d", prefix, i), "v")
	}
	return ops
}

// TestTxnRefusesWhatEtcdRefuses: too many operations (counted as etcd
// counts them, nested transactions included), duplicate keys, a put
// option on a missing key, an empty operation.
func TestTxnRefusesWhatEtcdRefuses(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, context.Background()
	max := etcdapi.DefaultMaxTxnOps
	for _, tc := range []struct {
		name string
		txn  clientv3.Txn
		want error
	}{
		{"max ops", c.Txn(ctx).Then(puts("k", max)...), nil},
		{"one op too many", c.Txn(ctx).Then(puts("k", max+1)...), rpctypes.ErrTooManyOps},
		{"one compare too many, before their keys are checked", c.Txn(ctx).If(make([]clientv3.Cmp, max+1)...), rpctypes.ErrTooManyOps},
		{"nested: what the parent leaves", c.Txn(ctx).Then(append(puts("k", max-4), clientv3.OpTxn(nil, puts("n", 3), nil))...), nil},
		{"nested: one more than the parent leaves", c.Txn(ctx).Then(append(puts("k", max-4), clientv3.OpTxn(nil, puts("n", 4), nil))...), rpctypes.ErrTooManyOps},
		{"put twice", c.Txn(ctx).Then(clientv3.OpPut("a", "1"), clientv3.OpPut("a", "2")), rpctypes.ErrDuplicateKey},
		{"put and delete", c.Txn(ctx).Then(clientv3.OpDelete("a", clientv3.WithPrefix()), clientv3.OpPut("ab", "2")), rpctypes.ErrDuplicateKey},
		{"put under a nested delete", c.Txn(ctx).Then(clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpDelete("a")}, nil), clientv3.OpPut("a", "2")), rpctypes.ErrDuplicateKey},
		{"put in both branches", c.Txn(ctx).Then(clientv3.OpPut("a", "1")).Else(clientv3.OpPut("a", "2")), nil},
		{"ignore_value on a missing key", c.Txn(ctx).Then(clientv3.OpPut("missing", "", clientv3.WithIgnoreValue())), rpctypes.ErrKeyNotFound},
		{"ignore_value with a value", c.Txn(ctx).Then(clientv3.OpPut("a", "v", clientv3.WithIgnoreValue())), rpctypes.ErrValueProvided},
		{"unknown lease", c.Txn(ctx).Then(clientv3.OpPut("a", "v", clientv3.WithLease(12345))), rpctypes.ErrLeaseNotFound},
		{"empty key", c.Txn(ctx).Then(clientv3.OpPut("", "v")), rpctypes.ErrEmptyKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.txn.Commit(); err != tc.want {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	kv := pb.NewKVClient(c.ActiveConnection())
	if _, err := kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{}}}); rpctypes.Error(err) != rpctypes.ErrKeyNotFound {
		t.Fatalf("an empty operation: %v, want etcd's ErrKeyNotFound", err)
	}
}

// TestMaxTxnOpsConfigured: MaxTxnOps bounds a transaction's operations;
// one above the store's own bound is refused at New.
func TestMaxTxnOpsConfigured(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	_, c, _ := serve(t, etcdapi.Config{Client: e.kvd, MaxTxnOps: 2})
	ctx := context.Background()
	if _, err := c.Txn(ctx).Then(puts("k", 2)...).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Txn(ctx).Then(puts("k", 3)...).Commit(); err != rpctypes.ErrTooManyOps {
		t.Fatalf("3 ops for MaxTxnOps 2: %v, want ErrTooManyOps", err)
	}
	if _, err := etcdapi.New(etcdapi.Config{Client: e.kvd, MaxTxnOps: limits.MaxTxnOps + 1}); !errors.Is(err, errs.ErrConfig) {
		t.Fatalf("MaxTxnOps past the store's: %v, want ErrConfig", err)
	}
}

// TestRangeStream: the messages of a RangeStream merge into Range's
// answer, for ranges read in pages (key order: more keys than a page,
// limits across and at page ends, filters), read whole (sorted, counted)
// and split by size (large values). A write between the pages of a
// range does not show: the pages are one snapshot.
func TestRangeStream(t *testing.T) {
	var (
		armed  atomic.Bool
		kc     *client.Client
		during = []byte("p/299z") // in the last page
	)
	e := start(t, 1, etcdapi.Config{Knobs: etcdapi.Knobs{BeforeRangeStreamPage: func() {
		if armed.CompareAndSwap(true, false) {
			if err := kc.Put(context.Background(), during, []byte("v")); err != nil {
				t.Error(err)
			}
		}
	}}})
	kc = e.kvd
	c, ctx := e.etcd, context.Background()
	for i := range 5 {
		put(t, c, fmt.Sprintf("s/%d", i), strings.Repeat(string(rune('a'+i)), 400<<10))
	}
	var mid int64
	for b := range 3 {
		ops := make([]clientv3.Op, 100)
		for i := range ops {
			ops[i] = clientv3.OpPut(fmt.Sprintf("p/%03d", b*100+i), fmt.Sprint(i))
		}
		r, err := c.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		if b == 1 {
			mid = r.Header.Revision
		}
	}
	put(t, c, "p/150", "again")
	kv := pb.NewKVClient(c.ActiveConnection())
	p, pEnd := []byte("p/"), []byte("p0")
	for _, tc := range []struct {
		name     string
		req      *pb.RangeRequest
		messages int // at least
	}{
		{"large values, limit", &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), Limit: 4}, 2},
		{"more keys than a page", &pb.RangeRequest{Key: p, RangeEnd: pEnd}, 2},
		{"limit across pages", &pb.RangeRequest{Key: p, RangeEnd: pEnd, Limit: 260}, 2},
		{"limit at a page's end", &pb.RangeRequest{Key: p, RangeEnd: pEnd, Limit: 256}, 1},
		{"limit of every key", &pb.RangeRequest{Key: p, RangeEnd: pEnd, Limit: 300}, 2},
		{"key ascending, keys only", &pb.RangeRequest{Key: p, RangeEnd: pEnd, SortOrder: pb.RangeRequest_ASCEND, KeysOnly: true}, 2},
		{"filter", &pb.RangeRequest{Key: p, RangeEnd: pEnd, MinModRevision: mid, Limit: 150}, 1},
		{"past revision", &pb.RangeRequest{Key: p, RangeEnd: pEnd, Revision: mid}, 1},
		{"from key", &pb.RangeRequest{Key: []byte("p/299"), RangeEnd: []byte{0}}, 1},
		{"sorted", &pb.RangeRequest{Key: p, RangeEnd: pEnd, SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_MOD, Limit: 10}, 1},
		{"count only", &pb.RangeRequest{Key: p, RangeEnd: pEnd, CountOnly: true}, 1},
		{"nothing", &pb.RangeRequest{Key: []byte("q")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := kv.Range(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			defer kc.Delete(ctx, during)
			stream, err := kv.RangeStream(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			got, messages := &pb.RangeResponse{}, 0
			for {
				m, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				messages++
				proto.Merge(got, m.RangeResponse)
			}
			if messages < tc.messages || got.String() != want.String() {
				t.Fatalf("%d messages merging into %d keys (count %d, more %v); want at least %d, and Range's %d keys (count %d, more %v)",
					messages, len(got.Kvs), got.Count, got.More, tc.messages, len(want.Kvs), want.Count, want.More)
			}
		})
	}
	s, err := kv.RangeStream(ctx, &pb.RangeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); rpctypes.Error(err) != rpctypes.ErrEmptyKey {
		t.Fatalf("RangeStream of the empty key: %v, want ErrEmptyKey", err)
	}
}

// TestHeaderNamesClusterMemberAndTerm: response headers come to carry the
// cluster id, a member's id and the raft term as the node reports them.
func TestHeaderNamesClusterMemberAndTerm(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	st, err := e.kvd.Status(context.Background(), e.nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	var h *pb.ResponseHeader
	for range 100 {
		r, err := e.etcd.Get(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if h = r.Header; h.ClusterId != 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.ClusterId != uint64(st.ClusterID) || h.MemberId != st.ID || h.RaftTerm != st.Term || h.ClusterId == 0 {
		t.Fatalf("header %v; want cluster %x, member %d, term %d", h, uint64(st.ClusterID), st.ID, st.Term)
	}
}

// TestOneSidedGets: with OneSidedGets a one-key Get is kvd's GET (one-sided
// where the client can): the key as a Range gives it, at a header
// revision between the key's mod revision and the store's; a missing key
// and every other Range read as ranges.
func TestOneSidedGets(t *testing.T) {
	e := start(t, 1, etcdapi.Config{OneSidedGets: true})
	c, ctx := e.etcd, context.Background()
	rk := put(t, c, "k", "v")
	rs := put(t, c, "other", "x")
	gets := e.kvd.Stats().Gets
	r, err := c.Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" || r.Kvs[0].ModRevision != rk || r.Count != 1 {
		t.Fatalf("get k: %v, %v", r, err)
	}
	if h := r.Header.Revision; h < rk || h > rs {
		t.Fatalf("header revision %d, want between k's mod revision %d and the store's %d", h, rk, rs)
	}
	if n := e.kvd.Stats().Gets - gets; n != 1 {
		t.Fatalf("%d GETs of kvd's client, want 1", n)
	}
	r, err = c.Get(ctx, "k", clientv3.WithKeysOnly())
	if err != nil || len(r.Kvs) != 1 || len(r.Kvs[0].Value) != 0 {
		t.Fatalf("get k --keys-only: %v, %v", r, err)
	}
	r, err = c.Get(ctx, "missing")
	if err != nil || len(r.Kvs) != 0 || r.Count != 0 || r.Header.Revision != rs {
		t.Fatalf("get of a missing key: %v, %v; want nothing at the store's revision %d", r, err, rs)
	}
	r, err = c.Get(ctx, "k", clientv3.WithRev(rk))
	if err != nil || len(r.Kvs) != 1 || r.Header.Revision != rs {
		t.Fatalf("get k at %d: %v, %v; want it under the store's revision %d", rk, r, err, rs)
	}
}

// TestKvdBoundsAreInvalidArguments: what kvd refuses and etcd has no
// error for is an InvalidArgument saying which bound, never Unknown: a
// negative revision bound or compare operand (kvd's are unsigned), a
// transaction reading more than kvd's transactions return.
func TestKvdBoundsAreInvalidArguments(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, context.Background()
	big := strings.Repeat("v", limits.MaxTxnReadBytes/2+1)
	put(t, c, "big/1", big)
	put(t, c, "big/2", big)
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"negative min mod revision", func() error { _, err := c.Get(ctx, "a", clientv3.WithMinModRev(-1)); return err }, "negative revision bound"},
		{"negative max create revision", func() error { _, err := c.Get(ctx, "a", clientv3.WithMaxCreateRev(-1)); return err }, "negative revision bound"},
		{"negative compare operand", func() error {
			_, err := c.Txn(ctx).If(clientv3.Compare(clientv3.Version("a"), ">", -1)).Commit()
			return err
		}, "negative number in compare"},
		{"txn reading too much", func() error {
			_, err := c.Txn(ctx).Then(clientv3.OpGet("big/", clientv3.WithPrefix())).Commit()
			return err
		}, "reads too much"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if s, _ := status.FromError(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), tc.want) {
				t.Fatalf("%v, want InvalidArgument saying %q", err, tc.want)
			}
		})
	}
}

// TestNodeHeadersNameTheirNode: on a node (Config.MemberID), headers name
// that node, whichever member the background refresh asked.
func TestNodeHeadersNameTheirNode(t *testing.T) {
	e := start(t, 3, etcdapi.Config{MemberID: 3})
	var h *pb.ResponseHeader
	for range 100 {
		r, err := e.etcd.Get(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if h = r.Header; h.ClusterId != 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.ClusterId == 0 || h.MemberId != 3 {
		t.Fatalf("header %v; want member 3 once the cluster id is known", h)
	}
}

// TestWritesWaitAsLongAsTheirContextAllows: a write through etcd's API
// waits for its outcome as long as its gRPC context allows, not the kvd
// client's attempt bound (etcd's clients bring their own deadlines): a
// front whose client bounds attempts at 1ms, far below the time of a
// DeleteRange of thousands of keys, still answers that delete with what
// it deleted, and other writes with their outcome.
func TestWritesWaitAsLongAsTheirContextAllows(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 4096
	for i := 0; i < n; i += limits.MaxTxnOps {
		var ops []client.Op
		for j := i; j < i+limits.MaxTxnOps; j++ {
			ops = append(ops, client.OpPut([]byte(fmt.Sprintf("bulk/%05d", j)), []byte(strings.Repeat("v", 100))))
		}
		if _, err := e.kvd.Txn(ctx, client.Txn{Then: ops}); err != nil {
			t.Fatal(err)
		}
	}
	short, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(e.nodes), AttemptTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { short.Close() })
	_, ec, _ := serve(t, etcdapi.Config{Client: short})
	d, err := ec.Delete(ctx, "bulk/", clientv3.WithPrefix())
	if err != nil || d.Deleted != n {
		t.Fatalf("delete of %d keys: %v, %v", n, d, err)
	}
	if _, err := ec.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := ec.Txn(ctx).Then(clientv3.OpPut("k", "v2")).Commit(); err != nil {
		t.Fatalf("txn: %v", err)
	}
}

// TestRangeAtPastRevisionAnswersAtTheStoresRevision: a Range at a past
// revision answers the keys as they were then under a header with the
// store's current revision, as etcd's: linearizable, serializable and
// streamed alike.
func TestRangeAtPastRevisionAnswersAtTheStoresRevision(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	c, ctx := e.etcd, ctxFor(t, 30*time.Second)
	r1 := put(t, c, "k", "v1")
	put(t, c, "k", "v2")
	now := put(t, c, "other", "x")
	kv := pb.NewKVClient(c.ActiveConnection())
	stream := func(req *pb.RangeRequest) (*pb.RangeResponse, error) {
		s, err := kv.RangeStream(ctx, req)
		if err != nil {
			return nil, err
		}
		got := &pb.RangeResponse{}
		for {
			m, err := s.Recv()
			if err == io.EOF {
				return got, nil
			}
			if err != nil {
				return nil, err
			}
			proto.Merge(got, m.RangeResponse)
		}
	}
	for _, tc := range []struct {
		name string
		read func(*pb.RangeRequest) (*pb.RangeResponse, error)
		req  *pb.RangeRequest
	}{
		{"key", func(r *pb.RangeRequest) (*pb.RangeResponse, error) { return kv.Range(ctx, r) }, &pb.RangeRequest{Key: []byte("k"), Revision: r1}},
		{"range", func(r *pb.RangeRequest) (*pb.RangeResponse, error) { return kv.Range(ctx, r) },
			&pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("l"), Revision: r1}},
		{"serializable", func(r *pb.RangeRequest) (*pb.RangeResponse, error) { return kv.Range(ctx, r) },
			&pb.RangeRequest{Key: []byte("k"), Revision: r1, Serializable: true}},
		{"before the key", func(r *pb.RangeRequest) (*pb.RangeResponse, error) { return kv.Range(ctx, r) }, &pb.RangeRequest{Key: []byte("k"), Revision: r1 - 1}},
		{"stream", stream, &pb.RangeRequest{Key: []byte("k"), Revision: r1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.read(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"k=v1"}
			if tc.req.Revision < r1 {
				want = nil
			}
			var got []string
			for _, kv := range r.Kvs {
				got = append(got, string(kv.Key)+"="+string(kv.Value))
			}
			if !slices.Equal(got, want) || r.Header.Revision != now {
				t.Fatalf("at %d: %q at header revision %d; want %q at the store's %d", tc.req.Revision, got, r.Header.Revision, want, now)
			}
		})
	}
}
