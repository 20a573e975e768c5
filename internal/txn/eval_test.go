package txn

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/revision"
)

type entry struct {
	value   string
	version uint64
}

// mapState is a State over a map, as a node's Pebble batch would show it.
type mapState struct {
	m       map[string]entry
	version uint64         // what Put stores
	leases  map[uint64]int // lease -> keys attached (CheckLease)
	maxKeys int
	// gets and metaReads count the reads of values and of metadata alone.
	gets, metaReads int
	leaseOf         map[string]uint64
	meta            map[string]revision.Meta // keys written more than once
	// past is the committed state at earlier revisions (RangeAt), each
	// key written once at its revision; compacted and current bound them.
	past               map[uint64]map[string]string
	compacted, current uint64
}

func newMapState() *mapState { return &mapState{m: map[string]entry{}} }

// Get gives a key written once at its version, unless meta says more.
func (s *mapState) Get(k []byte) ([]byte, revision.Meta, bool, error) {
	s.gets++
	return s.read(k)
}

func (s *mapState) read(k []byte) ([]byte, revision.Meta, bool, error) {
	e, ok := s.m[string(k)]
	if !ok {
		return nil, revision.Meta{}, false, nil
	}
	if m, ok := s.meta[string(k)]; ok {
		return []byte(e.value), m, true, nil
	}
	return []byte(e.value), revision.Meta{Create: e.version, Mod: e.version, Version: 1, Lease: s.leaseOf[string(k)]}, true, nil
}

func (s *mapState) Meta(k []byte) (revision.Meta, error) {
	s.metaReads++
	_, m, _, err := s.read(k)
	return m, err
}

func (s *mapState) Put(k, v []byte, lease uint64) (revision.Meta, error) {
	_, prev, _, _ := s.read(k)
	s.m[string(k)] = entry{string(v), s.version}
	delete(s.meta, string(k))
	m := prev.Next(s.version, lease)
	if prev.Version > 0 {
		if s.meta == nil {
			s.meta = map[string]revision.Meta{}
		}
		s.meta[string(k)] = m
	}
	if lease == 0 {
		delete(s.leaseOf, string(k))
	}
	if lease != 0 {
		if s.leaseOf == nil {
			s.leaseOf = map[string]uint64{}
		}
		if s.leaseOf[string(k)] != lease {
			s.leases[lease]++
		}
		s.leaseOf[string(k)] = lease
	}
	return m, nil
}

func (s *mapState) CheckLease(lease uint64, keys, detached [][]byte) error {
	have, ok := s.leases[lease]
	n := 0
	for _, k := range keys {
		if s.leaseOf[string(k)] != lease {
			n++
		}
	}
	for _, k := range detached {
		if s.leaseOf[string(k)] == lease {
			n--
		}
	}
	switch {
	case !ok:
		return fmt.Errorf("%w: %d", ErrLeaseNotFound, lease)
	case have+n > s.maxKeys:
		return fmt.Errorf("%w: %d", ErrLeaseFull, lease)
	}
	return nil
}

// Range visits the keys in order, as a Pebble iterator would.
func (s *mapState) Range(start, end []byte, fn func(k, v []byte, m revision.Meta) bool) error {
	keys := slices.Sorted(maps.Keys(s.m))
	for _, k := range keys {
		if k < string(start) || len(end) > 0 && k >= string(end) {
			continue
		}
		v, m, _, _ := s.read([]byte(k))
		if !fn([]byte(k), v, m) {
			break
		}
	}
	return nil
}

// RangeAt visits past[rev] in key order, checked as a store checks it.
func (s *mapState) RangeAt(start, end []byte, rev uint64, fn func(k, v []byte, m revision.Meta) bool) error {
	switch {
	case rev > s.current:
		return fmt.Errorf("%w: %d", errs.ErrFutureRevision, rev)
	case rev < s.compacted:
		return fmt.Errorf("%w: %d", errs.ErrCompacted, rev)
	}
	at := s.past[rev]
	for _, k := range slices.Sorted(maps.Keys(at)) {
		if k < string(start) || len(end) > 0 && k >= string(end) {
			continue
		}
		if !fn([]byte(k), []byte(at[k]), once(rev)) {
			break
		}
	}
	return nil
}

func (s *mapState) Delete(k []byte) error {
	delete(s.m, string(k))
	return nil
}

// base: a = "1" at version 5, b = "x" at version 6, c absent.
func base() *mapState {
	s := newMapState()
	s.m["a"] = entry{"1", 5}
	s.m["b"] = entry{"x", 6}
	return s
}

// once is the metadata of a key written once, at revision v.
func once(v uint64) revision.Meta { return revision.Meta{Create: v, Mod: v, Version: 1} }

func ver(k string, c Cmp, v uint64) Compare {
	return Compare{Key: b(k), Target: TargetMod, Cmp: c, Num: v}
}

func val(k string, c Cmp, v string) Compare {
	return Compare{Key: b(k), Target: TargetValue, Cmp: c, Value: b(v)}
}

// TestCompareSemantics: each compare against the base state, alone.
func TestCompareSemantics(t *testing.T) {
	for _, tc := range []struct {
		c    Compare
		want bool
	}{
		{ver("a", Equal, 5), true},
		{ver("a", Equal, 4), false},
		{ver("a", NotEqual, 5), false},
		{ver("a", NotEqual, 4), true},
		{ver("a", Less, 6), true},
		{ver("a", Less, 5), false},
		{ver("a", Greater, 4), true},
		{ver("a", Greater, 5), false},
		{ver("c", Equal, 0), true},    // absent: version 0, "must not exist"
		{ver("a", Equal, 0), false},   // exists
		{ver("c", Greater, 0), false}, // existence
		{ver("b", Greater, 0), true},
		{val("a", Equal, "1"), true},
		{val("a", Equal, "2"), false},
		{val("a", NotEqual, "2"), true},
		{val("a", NotEqual, "1"), false},
		{val("b", Less, "y"), true},
		{val("b", Greater, "y"), false},
		{val("b", Greater, "w"), true},
		{val("c", Equal, ""), false}, // an absent value is not the empty value
		{val("c", NotEqual, "x"), false},
		{val("c", Less, "z"), false},
		{Compare{Key: b("a"), Target: 9, Cmp: Equal}, false},         // unknown target: false everywhere
		{Compare{Key: b("a"), Target: TargetVersion, Cmp: 0}, false}, // unknown operator
	} {
		s := base()
		tx := Txn{Compares: []Compare{tc.c}, Then: []Op{{Type: Put, Key: b("t"), Value: b("then")}}, Else: []Op{{Type: Put, Key: b("e"), Value: b("else")}}}
		r, err := Apply(s, &tx, 10, true)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s(%s) %s %d%q", tc.c.Target, tc.c.Key, tc.c.Cmp, tc.c.Num, tc.c.Value)
		_, then := s.m["t"]
		_, els := s.m["e"]
		if r.Succeeded != tc.want || then != tc.want || els == tc.want {
			t.Errorf("%s: succeeded %v (then ran %v, else ran %v), want %v", name, r.Succeeded, then, els, tc.want)
		}
		if wantVer := base().m[string(tc.c.Key)].version; r.Compared[0].Mod != wantVer {
			t.Errorf("%s: compare version %d, want %d", name, r.Compared[0].Mod, wantVer)
		}
	}
}

// TestConditionalWrites: compare-and-swap as the client sends it (one
// version compare, one write), against the base state.
func TestConditionalWrites(t *testing.T) {
	put := func(k, v string, want uint64) Txn {
		return Txn{Compares: []Compare{ver(k, Equal, want)}, Then: []Op{{Type: Put, Key: b(k), Value: b(v)}}}
	}
	del := func(k string, want uint64) Txn {
		return Txn{Compares: []Compare{ver(k, Equal, want)}, Then: []Op{{Type: Delete, Key: b(k)}}}
	}
	for _, tc := range []struct {
		name    string
		tx      Txn
		ok      bool
		current uint64         // the compare version reported
		after   map[string]any // key -> value, or nil for absent; only keys listed are checked
	}{
		{"put at the current version", put("a", "2", 5), true, 5, map[string]any{"a": entry{"2", 10}}},
		{"put at a stale version", put("a", "2", 4), false, 5, map[string]any{"a": entry{"1", 5}}},
		{"put at a future version", put("a", "2", 9), false, 5, map[string]any{"a": entry{"1", 5}}},
		{"create an absent key (version 0)", put("c", "new", 0), true, 0, map[string]any{"c": entry{"new", 10}}},
		{"create an existing key (version 0)", put("a", "2", 0), false, 5, map[string]any{"a": entry{"1", 5}}},
		{"put an absent key at a version", put("c", "new", 5), false, 0, map[string]any{"c": nil}},
		{"delete at the current version", del("b", 6), true, 6, map[string]any{"b": nil}},
		{"delete at a stale version", del("b", 5), false, 6, map[string]any{"b": entry{"x", 6}}},
		{"delete an absent key at a version", del("c", 3), false, 0, map[string]any{"c": nil}},
	} {
		s := base()
		s.version = 10
		r, err := Apply(s, &tc.tx, 10, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Succeeded != tc.ok || r.Compared[0].Mod != tc.current {
			t.Errorf("%s: succeeded %v at version %d, want %v at %d", tc.name, r.Succeeded, r.Compared[0].Mod, tc.ok, tc.current)
		}
		for k, want := range tc.after {
			got, ok := s.m[k]
			if want == nil && ok || want != nil && got != want {
				t.Errorf("%s: %s is %+v (present %v), want %+v", tc.name, k, got, ok, want)
			}
		}
		if !tc.ok && len(r.Results) != 0 {
			t.Errorf("%s: failed CAS returned results %+v", tc.name, r.Results)
		}
	}
}

// TestBranchResults: operations run in order, later ones seeing earlier
// writes of the branch, and report what they did.
func TestBranchResults(t *testing.T) {
	s := base()
	s.version = 10
	tx := Txn{
		Compares: []Compare{ver("a", Equal, 5), val("b", Equal, "x")},
		Then: []Op{
			{Type: Get, Key: b("a")},
			{Type: Put, Key: b("a"), Value: b("A")},
			{Type: Get, Key: b("a")},
			{Type: Delete, Key: b("b")},
			{Type: Get, Key: b("b")},
			{Type: Delete, Key: b("c")},
			{Type: Get, Key: b("c")},
		},
	}
	r, err := Apply(s, &tx, 10, true)
	if err != nil {
		t.Fatal(err)
	}
	want := Response{Succeeded: true, Compared: []revision.Meta{once(5), once(6)}, Results: []Result{
		{Type: Get, Found: true, Meta: once(5), Value: b("1")},
		{Type: Put, Meta: revision.Meta{Create: 5, Mod: 10, Version: 2}},
		{Type: Get, Found: true, Meta: revision.Meta{Create: 5, Mod: 10, Version: 2}, Value: b("A")},
		{Type: Delete, Found: true},
		{Type: Get},
		{Type: Delete},
		{Type: Get},
	}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	if wantState := map[string]entry{"a": {"A", 10}}; !maps.Equal(s.m, wantState) {
		t.Fatalf("state %v, want %v", s.m, wantState)
	}
	// Without keepValues (a node that did not propose the entry), GETs say
	// what they found and nothing more.
	s = base()
	r, err = Apply(s, &Txn{Then: []Op{{Type: Get, Key: b("a")}}}, 10, false)
	if err != nil || r.Results[0].Value != nil || !r.Results[0].Found || r.Results[0].Meta.Mod != 5 {
		t.Fatalf("keepValues=false: %+v, %v", r, err)
	}
}

// TestReadBound: a branch whose GETs return more than MaxReadBytes fails
// whole: its writes are not made.
func TestReadBound(t *testing.T) {
	s := newMapState()
	s.m["big"] = entry{string(make([]byte, MaxReadBytes)), 1}
	s.m["small"] = entry{"s", 2}
	tx := Txn{Then: []Op{{Type: Put, Key: b("w"), Value: b("v")}, {Type: Get, Key: b("big")}, {Type: Get, Key: b("small")}}}
	if _, err := Apply(s, &tx, 3, false); !errors.Is(err, ErrReadTooLarge) {
		t.Fatalf("err %v, want ErrReadTooLarge", err)
	}
	if _, ok := s.m["w"]; ok {
		t.Fatal("the refused branch's PUT was applied")
	}
	// Exactly at the bound is fine; a missing key reads nothing.
	tx.Then = []Op{{Type: Get, Key: b("big")}, {Type: Get, Key: b("missing")}}
	if _, err := Apply(s, &tx, 3, false); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
}

// TestCompareTargetsHaveEtcdMeanings: version counts writes since the key
// was created, create and mod are revisions, lease the attached lease; an
// absent key compares as zeros on all of them, and false on its value.
func TestCompareTargetsHaveEtcdMeanings(t *testing.T) {
	s := newMapState()
	s.m["k"] = entry{"v", 8}
	s.meta = map[string]revision.Meta{"k": {Create: 3, Mod: 8, Version: 4, Lease: 7}}
	num := func(k string, tg Target, n uint64) Compare { return Compare{Key: b(k), Target: tg, Cmp: Equal, Num: n} }
	for _, tc := range []struct {
		c    Compare
		want bool
	}{
		{num("k", TargetVersion, 4), true},
		{num("k", TargetVersion, 8), false},
		{num("k", TargetCreate, 3), true},
		{num("k", TargetCreate, 8), false},
		{num("k", TargetMod, 8), true},
		{num("k", TargetMod, 3), false},
		{num("k", TargetLease, 7), true},
		{num("k", TargetLease, 0), false},
		{num("absent", TargetVersion, 0), true},
		{num("absent", TargetCreate, 0), true},
		{num("absent", TargetMod, 0), true},
		{num("absent", TargetLease, 0), true},
		{val("absent", NotEqual, "x"), false},
	} {
		r, err := Apply(s, &Txn{Compares: []Compare{tc.c}}, 20, true)
		if err != nil || r.Succeeded != tc.want {
			t.Errorf("%s(%s) = %d: succeeded %v (%v), want %v", tc.c.Target, tc.c.Key, tc.c.Num, r.Succeeded, err, tc.want)
		}
	}
}

// TestFreshKeyIsVersionOne: a key created by a transaction has version 1
// and create = mod = the transaction's revision; written again, version 2.
func TestFreshKeyIsVersionOne(t *testing.T) {
	s := newMapState()
	s.version = 11
	r, err := Apply(s, &Txn{Then: []Op{{Type: Put, Key: b("k"), Value: b("1")}}}, 11, true)
	if want := (revision.Meta{Create: 11, Mod: 11, Version: 1}); err != nil || r.Results[0].Meta != want {
		t.Fatalf("created: %+v, %v; want %+v", r.Results[0].Meta, err, want)
	}
	s.version = 12
	r, err = Apply(s, &Txn{Compares: []Compare{{Key: b("k"), Target: TargetVersion, Cmp: Equal, Num: 1}},
		Then: []Op{{Type: Put, Key: b("k"), Value: b("2")}}}, 12, true)
	if want := (revision.Meta{Create: 11, Mod: 12, Version: 2}); err != nil || !r.Succeeded || r.Results[0].Meta != want {
		t.Fatalf("rewritten: succeeded %v, %+v, %v; want %+v", r.Succeeded, r.Results[0].Meta, err, want)
	}
}

// TestRangeAtRevisionReadsTheCommittedPast: a Range with a revision reads
// the state at that revision as committed before the transaction (none
// of the path's writes), in the order asked beside the path's own reads,
// in the branch that runs; one at a revision the state cannot read
// (compacted, or past the store's before the transaction, an empty range
// too) fails the transaction whole, having written nothing, while one in
// the branch that does not run is not read.
func TestRangeAtRevisionReadsTheCommittedPast(t *testing.T) {
	at := func(k string, rev uint64) Op {
		return Op{Type: Range, Key: b(k), Query: rangeq.Request{Rev: rev}}
	}
	cur := Op{Type: Range, Key: b("a")}
	write := Op{Type: Put, Key: b("a"), Value: b("new")}
	for _, tc := range []struct {
		name string
		tx   Txn
		want []string // each result's value of a ("" none), in order
		err  error
	}{
		{"past beside the path's write", Txn{Then: []Op{write, at("a", 3), cur}}, []string{"", "old", "new"}, nil},
		{"before the key existed", Txn{Then: []Op{at("a", 2), write}}, []string{"", ""}, nil},
		{"at the store revision", Txn{Then: []Op{write, at("a", 6)}}, []string{"", "latest"}, nil},
		{"else branch", Txn{Compares: []Compare{val("a", Equal, "no")}, Then: []Op{at("a", 99)}, Else: []Op{at("a", 3), write}}, []string{"old", ""}, nil},
		{"future", Txn{Then: []Op{write, at("a", 7)}}, nil, errs.ErrFutureRevision},
		{"compacted", Txn{Then: []Op{write, at("a", 1)}}, nil, errs.ErrCompacted},
		{"empty range at a future revision", Txn{Then: []Op{write, {Type: Range, Key: b("b"), RangeEnd: b("a"), Query: rangeq.Request{Rev: 7}}}}, nil, errs.ErrFutureRevision},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			s.version, s.current, s.compacted = 10, 6, 2
			s.past = map[uint64]map[string]string{3: {"a": "old", "b": "y"}, 6: {"a": "latest"}}
			r, err := Apply(s, &tc.tx, 10, true)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || s.m["a"].value != "1" {
					t.Fatalf("%v, a = %q; want %v, nothing written", err, s.m["a"].value, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, res := range r.Results {
				v := ""
				if len(res.KVs) > 0 {
					v = string(res.KVs[0].Value)
				}
				got = append(got, v)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("results %q, want %q", got, tc.want)
			}
		})
	}
}

// TestValuesAreReadOnlyWhereNeeded: a PUT, a DELETE and a compare of
// anything but the value read a key's metadata alone (which the store
// keeps in memory for recent keys); only reads, compares of values and a
// PUT that keeps its value read values.
func TestValuesAreReadOnlyWhereNeeded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tx        Txn
		wantGets  int
		wantMetas int
	}{
		{"put", Txn{Then: []Op{{Type: Put, Key: b("a"), Value: b("2")}}}, 0, 1},
		{"put of an absent key", Txn{Then: []Op{{Type: Put, Key: b("c"), Value: b("2")}}}, 0, 1},
		{"put keeping the lease", Txn{Then: []Op{{Type: Put, Key: b("a"), Value: b("2"), IgnoreLease: true}}}, 0, 1},
		{"put keeping the value", Txn{Then: []Op{{Type: Put, Key: b("a"), IgnoreValue: true}}}, 1, 0},
		{"delete", Txn{Then: []Op{{Type: Delete, Key: b("a")}}}, 0, 1},
		{"version compare", Txn{Compares: []Compare{ver("a", Equal, 5)}}, 0, 1},
		{"value compare", Txn{Compares: []Compare{{Key: b("a"), Target: TargetValue, Cmp: Equal, Value: b("1")}}}, 1, 0},
		{"get", Txn{Then: []Op{{Type: Get, Key: b("a")}}}, 1, 0},
	} {
		s := base()
		s.version = 10
		if _, err := Apply(s, &tc.tx, 10, true); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.gets != tc.wantGets || s.metaReads != tc.wantMetas {
			t.Errorf("%s: %d value reads and %d metadata reads, want %d and %d", tc.name, s.gets, s.metaReads, tc.wantGets, tc.wantMetas)
		}
	}
}
