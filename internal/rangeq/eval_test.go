package rangeq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/revision"
)

// state is a Source over entries held in key order.
type state []KV

func (s state) source(start, end []byte, fn func(k, v []byte, m revision.Meta) bool) error {
	for _, e := range s {
		if bytes.Compare(e.Key, start) < 0 || (len(end) > 0 && bytes.Compare(e.Key, end) >= 0) {
			continue
		}
		if !fn(e.Key, e.Value, e.Meta) {
			break
		}
	}
	return nil
}

// six keys whose versions, create and mod revisions and values tie in
// places (e and f were written by one transaction), so that every sort
// shows how it orders ties.
var six = state{
	{Key: []byte("a"), Value: []byte("z"), Meta: revision.Meta{Create: 1, Mod: 5, Version: 3}},
	{Key: []byte("b"), Value: []byte("y"), Meta: revision.Meta{Create: 2, Mod: 2, Version: 1}},
	{Key: []byte("c"), Value: []byte("x"), Meta: revision.Meta{Create: 3, Mod: 7, Version: 2}},
	{Key: []byte("d"), Value: []byte("x"), Meta: revision.Meta{Create: 4, Mod: 4, Version: 1}},
	{Key: []byte("e"), Value: []byte("w"), Meta: revision.Meta{Create: 6, Mod: 6, Version: 1}},
	{Key: []byte("f"), Value: []byte("v"), Meta: revision.Meta{Create: 6, Mod: 6, Version: 1}},
}

func keys(kvs []KV) string {
	var b strings.Builder
	for _, kv := range kvs {
		b.Write(kv.Key)
	}
	return b.String()
}

func TestEvalSortsByEveryTargetInEveryOrder(t *testing.T) {
	want := map[Target][3]string{ // none, ascend, descend
		ByKey:     {"abcdef", "abcdef", "fedcba"},
		ByVersion: {"bdefca", "bdefca", "acbdef"},
		ByCreate:  {"abcdef", "abcdef", "efdcba"},
		ByMod:     {"bdaefc", "bdaefc", "cefadb"},
		ByValue:   {"fecdba", "fecdba", "abcdef"},
	}
	for target, byOrder := range want {
		for order, w := range byOrder {
			q := Request{Target: target, Order: Order(order)}
			r, err := Eval(context.Background(), &q, ReplyBounds, six.source)
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(r.KVs); got != w || r.More || r.Count != 6 {
				t.Errorf("target %d order %d: got %s count %d more %v, want %s count 6", target, order, got, r.Count, r.More, w)
			}
			if len(r.KVs) > 0 && !bytes.Equal(r.KVs[0].Value, six[r.KVs[0].Key[0]-'a'].Value) {
				t.Errorf("target %d order %d: value %q for %q", target, order, r.KVs[0].Value, r.KVs[0].Key)
			}
		}
	}
}

func TestEvalFiltersCountsAndLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		q     Request
		keys  string
		count uint64
		more  bool
		next  string
	}{
		{"min mod", Request{MinMod: 5}, "acef", 4, false, ""},
		{"max mod", Request{MaxMod: 5}, "abd", 3, false, ""},
		{"min create", Request{MinCreate: 3}, "cdef", 4, false, ""},
		{"max create", Request{MaxCreate: 2}, "ab", 2, false, ""},
		{"mod and create", Request{MinMod: 5, MaxCreate: 3}, "ac", 2, false, ""},
		{"filters with total count the range", Request{Flags: Total, MinMod: 5, MaxCreate: 3}, "ac", 6, false, ""},
		{"limit with total", Request{Flags: Total, Limit: 2}, "ab", 6, true, "c"},
		{"limit without total counts the page", Request{Limit: 2}, "ab", 2, true, "c"},
		{"limit and filter", Request{Flags: Total, Limit: 2, MinMod: 5}, "ac", 6, true, "e"},
		{"limit past the last match", Request{Flags: Total, Limit: 2, MinMod: 7}, "c", 6, false, ""},
		{"limit equal to the matches", Request{Flags: Total, Limit: 4, MinMod: 5}, "acef", 6, false, ""},
		{"count only", Request{Flags: CountOnly}, "", 6, false, ""},
		{"count only ignores filters", Request{Flags: CountOnly, MinMod: 7}, "", 6, false, ""},
		{"count only ignores the limit", Request{Flags: CountOnly, Limit: 1}, "", 6, false, ""},
		{"count only of a part", Request{Flags: CountOnly, Start: []byte("b"), End: []byte("d")}, "", 2, false, ""},
		{"part of the range", Request{Start: []byte("b"), End: []byte("e")}, "bcd", 3, false, ""},
		{"empty range", Request{Flags: Total, Start: []byte("c"), End: []byte("c")}, "", 0, false, ""},
		{"reversed range", Request{Flags: Total, Start: []byte("d"), End: []byte("c")}, "", 0, false, ""},
		{"nothing matches", Request{Flags: Total, MinCreate: 99}, "", 6, false, ""},
		{"descending with limit", Request{Flags: Total, Order: Descend, Limit: 2}, "fe", 6, true, "e"},
		{"descending filtered", Request{Flags: Total, Order: Descend, Limit: 2, MaxMod: 5}, "db", 6, true, "b"},
		{"descending whole", Request{Order: Descend, Limit: 6}, "fedcba", 6, false, ""},
		{"sorted limit", Request{Flags: Total, Target: ByMod, Limit: 2}, "bd", 6, true, ""},
		{"sorted offset", Request{Target: ByMod, Limit: 2, Offset: 2}, "ae", 2, true, ""},
		{"sorted last page", Request{Target: ByMod, Limit: 2, Offset: 4}, "fc", 2, false, ""},
		{"sorted past the end", Request{Target: ByMod, Limit: 2, Offset: 6}, "", 0, false, ""},
		{"sorted filtered", Request{Flags: Total, Target: ByMod, Order: Descend, MinCreate: 3}, "cefd", 6, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Eval(context.Background(), &tc.q, ReplyBounds, six.source)
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(r.KVs); got != tc.keys || r.Count != tc.count || r.More != tc.more || string(r.Next) != tc.next {
				t.Errorf("got %s count %d more %v next %q, want %s count %d more %v next %q",
					got, r.Count, r.More, r.Next, tc.keys, tc.count, tc.more, tc.next)
			}
		})
	}
}

func TestEvalKeysOnlyLeavesValuesOutButSortsByThem(t *testing.T) {
	for _, q := range []Request{
		{Flags: KeysOnly},
		{Flags: KeysOnly, Order: Descend},
		{Flags: KeysOnly, Target: ByValue},
	} {
		r, err := Eval(context.Background(), &q, ReplyBounds, six.source)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range r.KVs {
			if kv.Value != nil {
				t.Fatalf("%+v: value %q", q, kv.Value)
			}
		}
		if q.Target == ByValue && keys(r.KVs) != "fecdba" {
			t.Errorf("keys only by value: %s", keys(r.KVs))
		}
	}
}

// TestEvalPagesCoverTheResult: following Next (key order) or Offset (other
// targets) page after page, with bounds of a few entries and bytes, gives
// exactly the one-page answer, in every order.
func TestEvalPagesCoverTheResult(t *testing.T) {
	small := Bounds{Keys: 4, Bytes: 2 * EntryLen(1, 1), SortKeys: 100, SortBytes: 1000}
	for _, target := range []Target{ByKey, ByVersion, ByCreate, ByMod, ByValue} {
		for _, order := range []Order{None, Ascend, Descend} {
			base := Request{Target: target, Order: order, MinCreate: 2}
			whole, err := Eval(context.Background(), &base, ReplyBounds, six.source)
			if err != nil {
				t.Fatal(err)
			}
			var got []KV
			q := base
			for pages := 0; ; pages++ {
				if pages > 10 {
					t.Fatalf("target %d order %d: paging does not end", target, order)
				}
				r, err := Eval(context.Background(), &q, small, six.source)
				if err != nil {
					t.Fatal(err)
				}
				if len(r.KVs) > 2 {
					t.Fatalf("a page of %d entries over its bytes", len(r.KVs))
				}
				got = append(got, r.KVs...)
				if !r.More {
					break
				}
				q.Advance(len(r.KVs), r.Next)
			}
			if keys(got) != keys(whole.KVs) {
				t.Errorf("target %d order %d: pages %s, whole %s", target, order, keys(got), keys(whole.KVs))
			}
		}
	}
}

func TestEvalPageHoldsAnEntryLargerThanItsBytes(t *testing.T) {
	for _, order := range []Order{None, Descend} {
		q := Request{Order: order}
		r, err := Eval(context.Background(), &q, Bounds{Keys: 10, Bytes: 1}, six.source)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.KVs) != 1 || !r.More {
			t.Errorf("order %d: %d entries, more %v", order, len(r.KVs), r.More)
		}
	}
}

func TestEvalRefusesASortPastItsBounds(t *testing.T) {
	b := Bounds{Keys: 10, Bytes: 1000, SortKeys: 3, SortBytes: 1000}
	q := Request{Target: ByMod}
	if _, err := Eval(context.Background(), &q, b, six.source); !errors.Is(err, ErrTooLarge) || !errors.Is(err, errs.ErrBadRequest) {
		t.Fatalf("6 keys sorted within 3: %v", err)
	}
	q.MinCreate = 4 // d, e, f
	if r, err := Eval(context.Background(), &q, b, six.source); err != nil || keys(r.KVs) != "def" {
		t.Fatalf("3 keys sorted within 3: %v %s", err, keys(r.KVs))
	}
	b.SortBytes = 5 // 2 bytes a key with its value
	if _, err := Eval(context.Background(), &q, b, six.source); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("6 bytes sorted within 5: %v", err)
	}
	q.Flags = KeysOnly // values are not held
	if _, err := Eval(context.Background(), &q, b, six.source); err != nil {
		t.Fatalf("3 bytes of keys sorted within 5: %v", err)
	}
}

func TestEvalStopsWhenItsContextEnds(t *testing.T) {
	var many state
	for i := range 3 * checkEvery {
		many = append(many, KV{Key: []byte(fmt.Sprintf("k%06d", i)), Meta: revision.Meta{Mod: 1}})
	}
	sort.Slice(many, func(i, j int) bool { return bytes.Compare(many[i].Key, many[j].Key) < 0 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, q := range []Request{{Flags: CountOnly}, {Target: ByMod}, {MinMod: 2}} {
		if _, err := Eval(ctx, &q, ReplyBounds, many.source); !errors.Is(err, context.Canceled) {
			t.Errorf("%+v: %v", q, err)
		}
	}
}

func TestEvalRefusesWhatNoRangeCanBe(t *testing.T) {
	for _, q := range []Request{
		{Flags: KeysOnly | CountOnly},
		{Flags: 0x80},
		{Target: 5},
		{Order: 3},
		{Offset: 1},
	} {
		if _, err := Eval(context.Background(), &q, ReplyBounds, six.source); !errors.Is(err, ErrMalformed) {
			t.Errorf("%+v: %v", q, err)
		}
	}
}
