package kv

import (
	"errors"
	"reflect"
	"testing"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/txn"
)

// TestTxnRangesAndNestingOnEveryNode: a transaction with a range compare,
// a range delete, a nested transaction that sees that delete, and a range
// read is decided alike on every node, in one entry at one revision.
func TestTxnRangesAndNestingOnEveryNode(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	c.put("p/1", "a")
	c.put("p/2", "b")
	c.put("q", "c")
	resp, rev, err := c.txnAtLeader(&txn.Txn{
		Compares: []txn.Compare{{Key: []byte("p/"), RangeEnd: []byte("p0"), Target: txn.TargetVersion, Cmp: txn.Equal, Num: 1}},
		Then: []txn.Op{
			{Type: txn.DeleteRange, Key: []byte("p/"), RangeEnd: []byte("p0"), PrevKV: true},
			{Type: txn.Nested, Txn: &txn.Txn{
				Compares: []txn.Compare{{Key: []byte("p/"), RangeEnd: []byte("p0"), Target: txn.TargetCreate, Cmp: txn.Equal, Num: 0}},
				Then:     []txn.Op{tput("r", "gone")},
				Else:     []txn.Op{tput("r", "still there")},
			}},
			{Type: txn.Range, Key: []byte("a"), RangeEnd: []byte("\x00")},
		},
	})
	if err != nil || !resp.Succeeded {
		t.Fatalf("txn: %+v, %v", resp, err)
	}
	del, in, rng := resp.Results[0], resp.Results[1].Txn, resp.Results[2]
	switch {
	case del.Deleted != 2 || len(del.KVs) != 2 || string(del.KVs[0].Value) != "a":
		t.Errorf("range delete: %+v", del)
	case !in.Succeeded || in.Revision != rev || in.Results[0].Meta.Mod != rev:
		t.Errorf("nested: %+v; want its then branch at revision %d", in, rev)
	case rng.Count != 2 || string(rng.KVs[0].Key) != "q" || string(rng.KVs[1].Key) != "r":
		t.Errorf("range read: %+v; want q and r", rng)
	}
	want := map[string]versioned{"q": {"c", rev - 1}, "r": {"gone", rev}}
	for _, tn := range c.running() {
		c.caughtUp(tn)
		if got := kvState(t, tn.node); !reflect.DeepEqual(got, want) {
			t.Errorf("node %d: state %v, want %v", tn.id, got, want)
		}
		if got := tn.node.Revision(); got != rev {
			t.Errorf("node %d: revision %d, want %d", tn.id, got, rev)
		}
		checkMirror(t, tn)
	}
}

// TestTxnRefusedWholeOnEveryNode: a path that fails when applied (a put
// with ignore_value of an absent key, after a put of another) writes
// nothing and takes no revision, on any node.
func TestTxnRefusedWholeOnEveryNode(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	before := c.put("a", "1")
	_, _, err := c.txnAtLeader(&txn.Txn{Then: []txn.Op{
		tput("w", "v"),
		{Type: txn.Nested, Txn: &txn.Txn{Then: []txn.Op{{Type: txn.Put, Key: []byte("absent"), IgnoreValue: true}}}},
	}})
	if !errors.Is(err, txn.ErrKeyNotFound) {
		t.Fatalf("err %v, want key not found", err)
	}
	for _, tn := range c.running() {
		c.caughtUp(tn)
		if got := kvState(t, tn.node); len(got) != 1 {
			t.Errorf("node %d: state %v, want only a", tn.id, got)
		}
		if got := tn.node.Revision(); got != before {
			t.Errorf("node %d: revision %d, want %d (nothing applied)", tn.id, got, before)
		}
	}
	// ignore_value on a key that exists keeps its value.
	resp, rev, err := c.txnAtLeader(&txn.Txn{Then: []txn.Op{{Type: txn.Put, Key: []byte("a"), IgnoreValue: true}}})
	if err != nil || resp.Results[0].Meta.Version != 2 || rev != before+1 {
		t.Fatalf("ignore_value: %+v, %d, %v", resp, rev, err)
	}
	if v, _, _, _ := c.leader().node.Get([]byte("a")); string(v) != "1" {
		t.Errorf("a = %q after ignore_value, want 1", v)
	}
}

// TestTxnRangeAtPastRevisionOnEveryNode: a transaction that writes may
// read ranges at past revisions: each reads the committed history at its
// revision, not the transaction's writes. One at a compacted or future
// revision fails the transaction whole with etcd's error, on every node
// alike: none of them applies its writes.
func TestTxnRangeAtPastRevisionOnEveryNode(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	r1 := c.put("a", "1")
	r2 := c.put("a", "2")
	at := func(rev uint64) txn.Op {
		return txn.Op{Type: txn.Range, Key: []byte("a"), Query: rangeq.Request{Rev: rev}}
	}
	resp, _, err := c.txnAtLeader(&txn.Txn{Then: []txn.Op{tput("a", "3"), at(r1), at(r2)}})
	if err != nil || len(resp.Results) != 3 {
		t.Fatalf("past ranges beside a put: %+v, %v", resp, err)
	}
	for i, want := range map[int]string{1: "1", 2: "2"} {
		if kvs := resp.Results[i].KVs; len(kvs) != 1 || string(kvs[0].Value) != want {
			t.Errorf("range %d: %+v, want a = %q", i, kvs, want)
		}
	}
	if _, err := c.leader().node.Compact(ctxT(t), r2); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rev  uint64
		want error
	}{
		{"compacted", r1, errs.ErrCompacted},
		{"future", r2 + 100, errs.ErrFutureRevision},
	} {
		if _, _, err := c.txnAtLeader(&txn.Txn{Then: []txn.Op{tput("fail/"+tc.name, "x"), at(tc.rev)}}); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	last := c.put("z", "after") // every node has applied the refused ones once it has this
	for _, tn := range c.running() {
		c.caughtUp(tn)
		st := kvState(t, tn.node)
		if st["a"].value != "3" || st["z"].version != last || st["fail/compacted"] != (versioned{}) || st["fail/future"] != (versioned{}) {
			t.Errorf("node %d: state %v, want a = 3 and no fail/ keys", tn.id, st)
		}
	}
}
