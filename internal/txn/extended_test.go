package txn

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/revision"
)

// extended is a transaction of every kind of compare and operation added
// after the first encoding: range compares, range deletes, range reads,
// put options and a nested transaction.
func extended() []Txn {
	inner := Txn{
		Compares: []Compare{{Key: b("p/"), RangeEnd: b("p0"), Target: TargetValue, Cmp: Equal, Value: b("v")}},
		Then:     []Op{{Type: Put, Key: b("n"), IgnoreValue: true, Lease: 9}},
		Else:     []Op{{Type: Range, Key: b("p/"), RangeEnd: b("p0"), Query: rangeq.Request{Limit: 2, Flags: rangeq.KeysOnly}}},
	}
	return []Txn{
		{
			Compares: []Compare{
				{Key: b("a"), RangeEnd: b("b"), Target: TargetVersion, Cmp: Greater, Num: 0},
				{Key: b("z"), RangeEnd: b("\x00"), Target: TargetCreate, Cmp: Equal, Num: 0},
			},
			Then: []Op{
				{Type: DeleteRange, Key: b("d/"), RangeEnd: b("d0"), PrevKV: true},
				{Type: DeleteRange, Key: b("e")},
				{Type: Range, Key: b("a"), RangeEnd: b("\x00"), Query: rangeq.Request{Flags: rangeq.CountOnly}},
				{Type: Put, Key: b("k"), IgnoreLease: true, Value: b("v")},
				{Type: Nested, Txn: &inner},
			},
			Else: []Op{{Type: Nested, Txn: &Txn{}}},
		},
		{Then: []Op{{Type: Nested, Txn: &Txn{Then: []Op{{Type: Nested, Txn: &Txn{Then: []Op{{Type: Get, Key: b("x")}}}}}}}}},
	}
}

func extendedResponse() Response {
	kv := KV{Key: b("d/1"), Value: b("old"), Meta: revision.Meta{Create: 2, Mod: 3, Version: 2, Lease: 5}}
	return Response{Succeeded: true, Revision: 9, Compared: []revision.Meta{{Mod: 1}}, Results: []Result{
		{Type: DeleteRange, Found: true, Deleted: 2, KVs: []KV{kv}},
		{Type: Range, Found: true, Count: 3, More: true, KVs: []KV{{Key: b("a"), Meta: revision.Meta{Create: 1, Mod: 1, Version: 1}}}},
		{Type: Nested, Txn: &Response{Revision: 9, Compared: []revision.Meta{{}}, Results: []Result{
			{Type: Get, Found: true, Value: b("v"), Meta: revision.Meta{Create: 4, Mod: 4, Version: 1}},
			{Type: Nested, Txn: &Response{Succeeded: true, Revision: 9}},
		}}},
		{Type: Put, Meta: revision.Meta{Create: 2, Mod: 9, Version: 3}},
	}}
}

func TestExtendedRoundTrip(t *testing.T) {
	for i, tx := range extended() {
		enc := Append(nil, &tx)
		if len(enc) != EncodedLen(&tx) {
			t.Fatalf("encoded %d bytes, EncodedLen says %d", len(enc), EncodedLen(&tx))
		}
		got, err := Decode(enc)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !bytes.Equal(Append(nil, &got), enc) || i == 0 && !reflect.DeepEqual(got.Then[:4], tx.Then[:4]) {
			t.Fatalf("round trip changed %+v into %+v", tx, got)
		}
	}
	r := extendedResponse()
	got, err := DecodeResponse(AppendResponse(nil, &r))
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("response round trip: %+v, %v; want %+v", got, err, r)
	}
}

// TestNewOpsKeepTheOldFrame: every new compare and operation is framed
// as the first encoding frames an unknown one (an op: type, keyLen,
// valueLen, key, value; a compare of a non-numeric target: a value
// operand), under a number that encoding does not know, so that a kvd
// built before them parses the transaction and refuses it as invalid
// ("unknown operation N", "unknown target N"; a nested transaction, whose
// key is empty: "empty key") instead of misreading it.
func TestNewOpsKeepTheOldFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  byte
		tx   Txn
	}{
		{"range compare", byte(TargetVersion) | rangeCompare, Txn{Compares: []Compare{{Key: b("a"), RangeEnd: b("b"), Target: TargetVersion, Cmp: Equal}}}},
		{"range delete", byte(DeleteRange), Txn{Then: []Op{{Type: DeleteRange, Key: b("a"), RangeEnd: b("b")}}}},
		{"range read", byte(Range), Txn{Then: []Op{{Type: Range, Key: b("a"), RangeEnd: b("b")}}}},
		{"nested", byte(Nested), Txn{Then: []Op{{Type: Nested, Txn: &Txn{Then: []Op{{Type: Get, Key: b("x")}}}}}}},
		{"put options", putOpts, Txn{Then: []Op{{Type: Put, Key: b("a"), IgnoreValue: true}}}},
	} {
		enc := Append(nil, &tc.tx)
		r := reader{b: enc[txnHead:]}
		typ := r.u8()
		if len(tc.tx.Compares) > 0 {
			r.u8()
			r.bytes(int(r.u16()))
		} else {
			r.u16()
			r.u32()
			r.bytes(int(le.Uint16(enc[txnHead+1:])))
		}
		r.bytes(int(r.u32()))
		if len(tc.tx.Compares) == 0 {
			// An op's frame: type, keyLen u16, valueLen u32, key, value.
			r = reader{b: enc[txnHead:]}
			r.u8()
			kl, vl := int(r.u16()), int(r.u32())
			r.bytes(kl)
			r.bytes(vl)
		}
		if typ != tc.typ || typ <= byte(TargetLease) && len(tc.tx.Compares) > 0 || r.bad || len(r.b) != 0 {
			t.Errorf("%s: type %d (want %d, unknown to the first encoding), frame bad %v with %d bytes left", tc.name, typ, tc.typ, r.bad, len(r.b))
		}
	}
}

// TestRangeCompare: a compare on a range holds if it holds for every key
// of the range; on an empty range it compares the absent key (so a value
// compare is false, create = 0 true), as etcd's.
func TestRangeCompare(t *testing.T) {
	s := newMapState()
	s.m["p/1"] = entry{"v", 3}
	s.m["p/2"] = entry{"v", 4}
	s.m["q"] = entry{"w", 5}
	rc := func(key, end string, tg Target, c Cmp, n uint64, v string) Compare {
		cmp := Compare{Key: b(key), RangeEnd: b(end), Target: tg, Cmp: c, Num: n}
		if tg == TargetValue {
			cmp.Num, cmp.Value = 0, b(v)
		}
		return cmp
	}
	for _, tc := range []struct {
		name string
		c    Compare
		want bool
	}{
		{"every key's value equal", rc("p/", "p0", TargetValue, Equal, 0, "v"), true},
		{"one key's value differs", rc("p/", "\x00", TargetValue, Equal, 0, "v"), false},
		{"mod below for all", rc("p/", "p0", TargetMod, Less, 5, ""), true},
		{"mod below fails on one", rc("p/", "p0", TargetMod, Less, 4, ""), false},
		{"empty range: value compare false", rc("x", "y", TargetValue, NotEqual, 0, "v"), false},
		{"empty range: create = 0", rc("x", "y", TargetCreate, Equal, 0, ""), true},
		{"empty range: version > 0 false", rc("x", "y", TargetVersion, Greater, 0, ""), false},
		{"end before key: empty", rc("q", "a", TargetCreate, Equal, 0, ""), true},
		{"from key on", rc("p/2", "\x00", TargetVersion, Equal, 1, ""), true},
	} {
		r, err := Apply(s, &Txn{Compares: []Compare{tc.c}}, 10, true)
		if err != nil || r.Succeeded != tc.want {
			t.Errorf("%s: succeeded %v, %v; want %v", tc.name, r.Succeeded, err, tc.want)
		}
	}
	// The failing key's metadata is reported.
	r, _ := Apply(s, &Txn{Compares: []Compare{rc("p/", "p0", TargetMod, Less, 4, "")}}, 10, true)
	if r.Compared[0] != once(4) {
		t.Errorf("compared %+v, want the failing key's %+v", r.Compared[0], once(4))
	}
}

// TestDeleteRangeInTxn: a range delete counts and returns what it deletes,
// later operations see the keys gone, and a range over the limit applies
// nothing.
func TestDeleteRangeInTxn(t *testing.T) {
	s := newMapState()
	s.m["p/1"] = entry{"a", 3}
	s.m["p/2"] = entry{"b", 4}
	s.m["q"] = entry{"c", 5}
	tx := Txn{Then: []Op{
		{Type: Put, Key: b("o"), Value: b("new")},
		{Type: DeleteRange, Key: b("o"), RangeEnd: b("p0"), PrevKV: true},
		{Type: Range, Key: b("a"), RangeEnd: b("\x00")},
		{Type: Get, Key: b("p/1")},
	}}
	// "o" is put and inside the deleted range: etcd refuses it, so put
	// beside it instead.
	if err := tx.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate: %v, want the duplicate key refused", err)
	}
	tx.Then[0].Key = b("n")
	if err := tx.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := Apply(s, &tx, 10, true)
	if err != nil {
		t.Fatal(err)
	}
	del := r.Results[1]
	if del.Deleted != 2 || !del.Found || len(del.KVs) != 2 || string(del.KVs[1].Value) != "b" || del.KVs[0].Meta != once(3) {
		t.Errorf("delete range result %+v", del)
	}
	rng := r.Results[2]
	if rng.Count != 2 || string(rng.KVs[0].Key) != "n" || string(rng.KVs[1].Key) != "q" || rng.KVs[0].Meta != once(10) {
		t.Errorf("range after the delete sees %+v, want n (this txn's put) and q", rng)
	}
	if r.Results[3].Found {
		t.Errorf("get after the delete found the key")
	}
	if _, ok := s.m["p/1"]; ok || s.m["n"].value != "new" {
		t.Errorf("state after: %v", s.m)
	}
}

// TestNestedTxn: a nested transaction's compares see the outer branch's
// earlier writes, its branch runs in place, and its response nests.
func TestNestedTxn(t *testing.T) {
	s := base() // a = "1" at 5, b = "x" at 6
	s.version = 10
	tx := Txn{
		Compares: []Compare{{Key: b("a"), Target: TargetVersion, Cmp: Equal, Num: 1}},
		Then: []Op{
			{Type: Put, Key: b("c"), Value: b("3")},
			{Type: Nested, Txn: &Txn{
				Compares: []Compare{val("c", Equal, "3")},
				Then:     []Op{{Type: Get, Key: b("c")}, {Type: Put, Key: b("d"), Value: b("4")}},
				Else:     []Op{{Type: Put, Key: b("e"), Value: b("no")}},
			}},
			{Type: Get, Key: b("d")},
		},
	}
	if err := tx.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := Apply(s, &tx, 10, true)
	if err != nil {
		t.Fatal(err)
	}
	in := r.Results[1].Txn
	switch {
	case !r.Succeeded || in == nil || !in.Succeeded:
		t.Fatalf("outer %v, nested %+v; want both to succeed", r.Succeeded, in)
	case string(in.Results[0].Value) != "3" || in.Results[1].Meta != once(10):
		t.Errorf("nested results %+v", in.Results)
	case !r.Results[2].Found || string(r.Results[2].Value) != "4":
		t.Errorf("get after the nested txn: %+v, want its put", r.Results[2])
	}
	if _, ok := s.m["e"]; ok || s.m["d"].value != "4" {
		t.Errorf("state after: %v", s.m)
	}
}

// TestPutIgnoreOptions: ignore_value keeps the value, ignore_lease the
// lease, and either on an absent key fails the transaction whole.
func TestPutIgnoreOptions(t *testing.T) {
	s := base()
	s.version = 10
	s.leases = map[uint64]int{7: 1}
	s.maxKeys = 10
	s.leaseOf = map[string]uint64{"a": 7}
	r, err := Apply(s, &Txn{Then: []Op{
		{Type: Put, Key: b("a"), IgnoreValue: true},
		{Type: Put, Key: b("b"), Value: b("y"), IgnoreLease: true},
	}}, 10, true)
	if err != nil {
		t.Fatal(err)
	}
	if s.m["a"].value != "1" || s.leaseOf["a"] != 0 || r.Results[0].Meta.Version != 2 {
		t.Errorf("ignore_value: a = %q lease %d (%+v); want the value kept, the lease dropped (none given)", s.m["a"].value, s.leaseOf["a"], r.Results[0].Meta)
	}
	s.leaseOf["a"] = 7
	delete(s.meta, "a") // the mock then reports the lease of leaseOf
	if _, err := Apply(s, &Txn{Then: []Op{{Type: Put, Key: b("a"), Value: b("2"), IgnoreLease: true}}}, 11, true); err != nil || s.leaseOf["a"] != 7 || s.m["a"].value != "2" {
		t.Errorf("ignore_lease: %v, a = %q lease %d; want the new value on lease 7", err, s.m["a"].value, s.leaseOf["a"])
	}
	before := len(s.m)
	_, err = Apply(s, &Txn{Then: []Op{{Type: Put, Key: b("new"), Value: b("v")}, {Type: Put, Key: b("c"), IgnoreValue: true}}}, 12, true)
	if !errors.Is(err, ErrKeyNotFound) || !strings.Contains(err.Error(), "key not found") || len(s.m) != before {
		t.Errorf("ignore_value on an absent key: %v, %d keys (had %d); want key not found and nothing applied", err, len(s.m), before)
	}
}

// TestRangeRead: count, limit, keys-only and count-only.
func TestRangeRead(t *testing.T) {
	s := newMapState()
	for i, k := range []string{"k1", "k2", "k3", "l"} {
		s.m[k] = entry{"v" + k, uint64(i + 1)}
	}
	for _, tc := range []struct {
		name  string
		op    Op
		count uint64
		keys  string
		more  bool
	}{
		{"prefix", Op{Type: Range, Key: b("k"), RangeEnd: b("l")}, 3, "k1 k2 k3", false},
		{"limit", Op{Type: Range, Key: b("k"), RangeEnd: b("l"), Query: rangeq.Request{Limit: 2}}, 3, "k1 k2", true},
		{"keys only", Op{Type: Range, Key: b("k2"), RangeEnd: b("\x00"), Query: rangeq.Request{Flags: rangeq.KeysOnly}}, 3, "k2 k3 l", false},
		{"sorted by mod, descending, limit", Op{Type: Range, Key: b("k"), RangeEnd: b("\x00"),
			Query: rangeq.Request{Target: rangeq.ByMod, Order: rangeq.Descend, Limit: 2}}, 4, "l k3", true},
		{"filtered by create", Op{Type: Range, Key: b("k"), RangeEnd: b("\x00"), Query: rangeq.Request{MinCreate: 2, MaxCreate: 3}}, 4, "k2 k3", false},
		{"count only", Op{Type: Range, Key: b("a"), RangeEnd: b("\x00"), Query: rangeq.Request{Flags: rangeq.CountOnly}}, 4, "", false},
		{"one key", Op{Type: Range, Key: b("k2")}, 1, "k2", false},
		{"empty", Op{Type: Range, Key: b("m"), RangeEnd: b("n")}, 0, "", false},
	} {
		r, err := Apply(s, &Txn{Then: []Op{tc.op}}, 10, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		res := r.Results[0]
		var keys []string
		for _, kv := range res.KVs {
			keys = append(keys, string(kv.Key))
			if tc.op.Query.Flags&rangeq.KeysOnly != 0 != (kv.Value == nil) {
				t.Errorf("%s: value %q", tc.name, kv.Value)
			}
		}
		if res.Count != tc.count || strings.Join(keys, " ") != tc.keys || res.More != tc.more {
			t.Errorf("%s: count %d keys %q more %v; want %d %q %v", tc.name, res.Count, keys, res.More, tc.count, tc.keys, tc.more)
		}
	}
}

// TestLongPathSeesItsWrites: past the few writes looked up in place, a
// path's reads still see its earlier writes (the index of last writes).
func TestLongPathSeesItsWrites(t *testing.T) {
	s := newMapState()
	s.m["z"] = entry{"old", 1}
	var ops []Op
	for i := range 2 * indexFrom {
		ops = append(ops, Op{Type: Put, Key: []byte{'k', byte('a' + i)}, Value: []byte{byte('0' + i)}})
	}
	ops = append(ops, Op{Type: Delete, Key: b("z")}, Op{Type: Get, Key: b("ka")}, Op{Type: Get, Key: b("z")},
		Op{Type: Range, Key: b("k"), RangeEnd: b("\x00"), Query: rangeq.Request{Flags: rangeq.CountOnly}})
	r, err := Apply(s, &Txn{Then: ops}, 10, true)
	if err != nil {
		t.Fatal(err)
	}
	n := len(ops)
	if g := r.Results[n-3]; !g.Found || string(g.Value) != "0" {
		t.Errorf("get of the first put: %+v", g)
	}
	if r.Results[n-2].Found {
		t.Errorf("get of the deleted key found it")
	}
	if c := r.Results[n-1].Count; c != 2*indexFrom {
		t.Errorf("count of k*: %d, want %d (z deleted)", c, 2*indexFrom)
	}
}
