package kv

import (
	"maps"
	"slices"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft"
)

// atomicRecorder keeps each Apply call whole, with its Atomic flags.
type atomicRecorder struct{ calls [][]Write }

func (r *atomicRecorder) Apply(ws []Write, _ uint64) {
	cp := make([]Write, len(ws))
	for i, w := range ws {
		cp[i] = w
		cp[i].Key = append([]byte(nil), w.Key...)
		cp[i].Value = append([]byte(nil), w.Value...)
	}
	r.calls = append(r.calls, cp)
}
func (r *atomicRecorder) Restore()                     {}
func (r *atomicRecorder) BatchAhead()                  {}
func (r *atomicRecorder) Events([]Write, uint64, bool) {}

// checkApplyPrefixes fails unless a lock-free reader of call can only see
// states the batch ops passed through: a call not marked Atomic is
// published a write at a time, so each of its prefixes must be the state
// after some prefix of ops (starting from an empty cache).
func checkApplyPrefixes(t *testing.T, ops, call []Write) {
	t.Helper()
	if len(call) > 0 && call[0].Atomic {
		return // published whole: readers see the batch's start or end
	}
	apply := func(m map[string]string, w Write) {
		if w.Deleted {
			delete(m, string(w.Key))
		} else {
			m[string(w.Key)] = string(w.Value)
		}
	}
	held := []map[string]string{{}}
	for _, w := range ops {
		next := maps.Clone(held[len(held)-1])
		apply(next, w)
		held = append(held, next)
	}
	cur := map[string]string{}
	for i, w := range call {
		apply(cur, w)
		ok := false
		for _, h := range held {
			ok = ok || maps.Equal(h, cur)
		}
		if !ok {
			t.Fatalf("non-atomic Apply %v: after its write %d the cache holds %v, a state no index had (%v)",
				call, i+1, cur, held)
		}
	}
}

// TestCollapsedBatchShowsOnlyStatesThatHeld: collapsing a key's repeated
// writes to its last one must not let a reader see a later write of
// another key without the earlier write that preceded it in the log
// (j=a, k=x, j=b was delivered as k=x, j=b one write at a time: between
// them the region held k=x without j=a). A repeat with nothing between
// stays a plain call.
func TestCollapsedBatchShowsOnlyStatesThatHeld(t *testing.T) {
	w := func(v uint64, k, val string) Write {
		return Write{Meta: revision.Meta{Mod: v}, Key: []byte(k), Value: []byte(val)}
	}
	del := func(v uint64, k string) Write {
		return Write{Meta: revision.Meta{Mod: v}, Key: []byte(k), Deleted: true}
	}
	for _, tc := range []struct {
		name       string
		ops        []Write
		wantAtomic bool
	}{
		{"another key between", []Write{w(7, "j", "a"), w(8, "k", "x"), w(9, "j", "b")}, true},
		{"delete with another key between", []Write{w(7, "j", "a"), w(8, "k", "x"), del(9, "j")}, true},
		{"repeat with nothing between", []Write{w(7, "j", "a"), w(8, "j", "b"), w(9, "k", "x")}, false},
		{"three in a row, then another key", []Write{w(7, "j", "a"), w(8, "j", "b"), w(9, "j", "c"), w(10, "k", "x")}, false},
		{"distinct keys", []Write{w(7, "j", "a"), w(8, "k", "x")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &atomicRecorder{}
			m := &machine{pub: rec}
			m.sc.applies = append(m.sc.applies, tc.ops...)
			m.publish(0)
			if len(rec.calls) != 1 {
				t.Fatalf("%d Apply calls, want 1", len(rec.calls))
			}
			call := rec.calls[0]
			if got := len(call) > 0 && call[0].Atomic; got != tc.wantAtomic {
				t.Fatalf("Atomic %t, want %t (%v)", got, tc.wantAtomic, call)
			}
			checkApplyPrefixes(t, tc.ops, call)
			if m.sc.atomic {
				t.Fatal("the atomic mark outlived its batch")
			}
		})
	}
}

// TestCollapsedBatchWithTxnShowsOnlyStatesThatHeld runs the case through
// real entries: a transaction that wrote k because j was a, between two
// writes of j: a reader must never see k=x and then j absent.
func TestCollapsedBatchWithTxnShowsOnlyStatesThatHeld(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{WALSegmentSize: 1 << 20}) // small: zero-filled when made
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	met, _ := newMetrics(nil)
	rec := &atomicRecorder{}
	m := newMachine(Config{Publisher: rec}.withDefaults(), met)
	if err := m.Open(raft.Env{ID: 1, Store: st, Logger: peertest.Logger()}); err != nil {
		t.Fatal(err)
	}
	put := func(k, v string) []byte {
		return appendCommand(nil, command{op: opPut, proposer: 2, reqID: 1, key: []byte(k), value: []byte(v)})
	}
	tx := txn.Txn{
		Compares: []txn.Compare{{Key: []byte("j"), Target: txn.TargetValue, Cmp: txn.Equal, Value: []byte("a")}},
		Then:     []txn.Op{{Type: txn.Put, Key: []byte("k"), Value: []byte("x")}},
	}
	entry := func(i uint64, data []byte) *pb.Entry {
		return &pb.Entry{Index: new(i), Term: new(uint64(2)), Type: pb.EntryNormal.Enum(), Data: data}
	}
	u := st.NewUpdate()
	defer u.Close()
	if _, err := m.Apply(u, []*pb.Entry{
		entry(7, put("j", "a")),
		entry(8, appendCommand(nil, command{op: opTxn, proposer: 2, reqID: 2, value: txn.Append(nil, &tx)})),
		entry(9, put("j", "b")),
	}, nil); err != nil {
		t.Fatal(err)
	}
	ops := append([]Write(nil), m.sc.applies...)
	m.publish(0)
	if len(rec.calls) != 1 {
		t.Fatalf("%d Apply calls, want 1", len(rec.calls))
	}
	if len(ops) != 3 || string(ops[1].Key) != "k" {
		t.Fatalf("the batch's writes are %v, want j, k (the transaction's), j", ops)
	}
	checkApplyPrefixes(t, ops, rec.calls[0])
}

// TestApplyCompletesOnlyThisNodesProposals: the outcomes Apply returns are
// those of the commands this node proposed (raft completes no other
// node's), whichever kind of command.
func TestApplyCompletesOnlyThisNodesProposals(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{WALSegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	met, _ := newMetrics(nil)
	m := newMachine(Config{}.withDefaults(), met)
	if err := m.Open(raft.Env{ID: 1, Store: st, Logger: peertest.Logger()}); err != nil {
		t.Fatal(err)
	}
	tx := txn.Txn{Then: []txn.Op{{Type: txn.Put, Key: []byte("t"), Value: []byte("x")}}}
	var ents []*pb.Entry
	for i, c := range []command{
		{op: opPut, proposer: 2, reqID: 1, key: []byte("a"), value: []byte("1")},
		{op: opPut, proposer: 1, reqID: 2, key: []byte("a"), value: []byte("2")},
		{op: opDelete, proposer: 3, reqID: 3, key: []byte("a")},
		{op: opTxn, proposer: 2, reqID: 4, value: txn.Append(nil, &tx)},
		{op: opDelete, proposer: 1, reqID: 5, key: []byte("t")},
	} {
		ents = append(ents, &pb.Entry{Index: new(uint64(i + 1)), Term: new(uint64(1)), Type: pb.EntryNormal.Enum(), Data: appendCommand(nil, c)})
	}
	u := st.NewUpdate()
	defer u.Close()
	out, err := m.Apply(u, ents, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, o := range out {
		if o.Proposer != 1 {
			t.Errorf("outcome of node %d's proposal %d returned to node 1", o.Proposer, o.ReqID)
		}
		got = append(got, o.ReqID)
	}
	if !slices.Equal(got, []uint64{2, 5}) {
		t.Fatalf("outcomes for proposals %v, want node 1's: [2 5]", got)
	}
}
