package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
)

// TestTxnRangesNestedAndPutOptions: etcd's Txn ops through the client
// against a real node: a prefix compare, a prefix delete with prev_kv, a
// nested transaction seeing it, a range read with a limit, and put
// options.
func TestTxnRangesNestedAndPutOptions(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	for _, kv := range [][2]string{{"job/1", "a"}, {"job/2", "b"}, {"jobs", "x"}, {"z", "z"}} {
		if err := c.Put(ctx, k(kv[0]), k(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.Txn(ctx, client.Txn{
		If: []client.Cmp{client.CompareVersion(k("job/"), client.CmpEqual, 1).WithPrefix()},
		Then: []client.Op{
			client.OpDeletePrefix(k("job/"), client.WithPrevKV()),
			client.OpTxn([]client.Cmp{client.KeyMissing(k("job/")).WithPrefix()},
				[]client.Op{client.OpPut(k("done"), k("1"))}, []client.Op{client.OpPut(k("done"), k("0"))}),
			client.OpRange(k("j"), nil, client.WithLimit(1)),
			client.OpPrefix(nil, client.WithCountOnly()),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	del, in, rng, all := r.Results[0], r.Results[1].Txn, r.Results[2], r.Results[3]
	switch {
	case !r.Succeeded || del.Deleted != 2 || len(del.KVs) != 2 || string(del.KVs[1].Value) != "b":
		t.Fatalf("prefix delete: %+v", r)
	case in == nil || !in.Succeeded || in.Results[0].ModRevision != r.Revision || in.Revision != r.Revision:
		t.Fatalf("nested: %+v", in)
	case rng.Count != 2 || len(rng.KVs) != 1 || string(rng.KVs[0].Key) != "jobs" || !rng.More:
		t.Fatalf("range from j, limit 1: %+v; want jobs of 2 keys (jobs, z), more", rng)
	case all.Count != 3 || len(all.KVs) != 0:
		t.Fatalf("count of every key: %+v; want done, jobs, z", all)
	}
	// A sorted range, read with the one range evaluation.
	sorted, err := c.Txn(ctx, client.Txn{Then: []client.Op{
		client.OpRange(nil, nil, client.WithSort(client.SortByKey, client.SortDescend), client.WithLimit(2), client.WithKeysOnly()),
	}})
	if err != nil || len(sorted.Results[0].KVs) != 2 || string(sorted.Results[0].KVs[0].Key) != "z" ||
		string(sorted.Results[0].KVs[1].Key) != "jobs" || sorted.Results[0].KVs[0].Value != nil || !sorted.Results[0].More {
		t.Fatalf("range of every key, descending, 2 keys only: %+v, %v", sorted, err)
	}
	// ignore_value: keeps the value; on an absent key, not found.
	rev, err := c.PutRevision(ctx, k("z"), nil, client.WithIgnoreValue())
	if v, err2 := c.Get(ctx, k("z")); err != nil || err2 != nil || string(v) != "z" || rev <= r.Revision {
		t.Fatalf("put --ignore-value: %d, %v; z = %q, %v", rev, err, v, err2)
	}
	if prev, _, err := c.PutPrev(ctx, k("z"), nil, client.WithIgnoreValue()); err != nil || prev == nil || string(prev.Value) != "z" || prev.Version != 2 {
		t.Fatalf("PutPrev with ignore_value: %+v, %v; want the previous z at version 2", prev, err)
	}
	if _, err := c.PutRevision(ctx, k("absent"), nil, client.WithIgnoreValue()); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("ignore_value on an absent key: %v, want ErrNotFound", err)
	}
	if _, err := c.PutRevision(ctx, k("z"), k("v"), client.WithIgnoreValue()); !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "value is provided") {
		t.Fatalf("ignore_value with a value: %v", err)
	}
	if _, err := c.PutRevision(ctx, k("z"), k("v"), client.WithIgnoreLease(), client.WithLease(7)); !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "lease is provided") {
		t.Fatalf("ignore_lease with a lease: %v", err)
	}
	// ignore_lease keeps a key on its lease.
	id, err := c.Grant(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutRevision(ctx, k("svc"), k("v1"), client.WithLease(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutRevision(ctx, k("svc"), k("v2"), client.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	if v, m, _, err := c.GetMeta(ctx, k("svc")); err != nil || string(v) != "v2" || m.Lease != id {
		t.Fatalf("svc after put --ignore-lease: %q %+v, %v; want v2 on lease %v", v, m, err, id)
	}
	// Options an op cannot take are refused before anything is sent.
	_, err = c.Txn(ctx, client.Txn{Then: []client.Op{client.OpRange(k("a"), nil, client.WithConsistency(client.Serializable))}})
	if !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("OpRange WithConsistency: %v, want ErrBadRequest", err)
	}
}
