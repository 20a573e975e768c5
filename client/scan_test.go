package client

import (
	"testing"

	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// TestCheckPage: a page that breaks what was asked (too many keys, keys
// out of order or out of the range, a continuation that does not move on,
// which would make Range page forever) is refused; good pages pass.
func TestCheckPage(t *testing.T) {
	kvs := func(keys ...string) []wire.ScanKV {
		out := make([]wire.ScanKV, len(keys))
		for i, k := range keys {
			out[i] = wire.ScanKV{Key: []byte(k), Meta: revision.Meta{Mod: 1}}
		}
		return out
	}
	q := rangeq.Request{Start: []byte("b"), End: []byte("m"), Limit: 3}
	for _, tc := range []struct {
		name string
		page wire.ScanResponse
		ok   bool
	}{
		{"empty", wire.ScanResponse{}, true},
		{"full with more", wire.ScanResponse{Flags: wire.ScanMore, Next: []byte("e"), KVs: kvs("b", "c", "d")}, true},
		{"over the limit", wire.ScanResponse{KVs: kvs("b", "c", "d", "e")}, false},
		{"before start", wire.ScanResponse{KVs: kvs("a")}, false},
		{"at end", wire.ScanResponse{KVs: kvs("m")}, false},
		{"out of order", wire.ScanResponse{KVs: kvs("c", "b")}, false},
		{"repeated key", wire.ScanResponse{KVs: kvs("c", "c")}, false},
		{"more with no keys", wire.ScanResponse{Flags: wire.ScanMore, Next: []byte("c")}, false},
		{"next not past the last key", wire.ScanResponse{Flags: wire.ScanMore, Next: []byte("c"), KVs: kvs("b", "c")}, false},
	} {
		if err := checkPage(&q, &tc.page); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		name string
		q    rangeq.Request
		page wire.ScanResponse
		ok   bool
	}{
		{"descending", rangeq.Request{Order: rangeq.Descend, End: []byte("m")}, wire.ScanResponse{Flags: wire.ScanMore, Next: []byte("c"), KVs: kvs("e", "c")}, true},
		{"descending out of order", rangeq.Request{Order: rangeq.Descend}, wire.ScanResponse{KVs: kvs("c", "e")}, false},
		{"descending next above the last key", rangeq.Request{Order: rangeq.Descend}, wire.ScanResponse{Flags: wire.ScanMore, Next: []byte("d"), KVs: kvs("e", "c")}, false},
		{"descending without next", rangeq.Request{Order: rangeq.Descend}, wire.ScanResponse{Flags: wire.ScanMore, KVs: kvs("e", "c")}, false},
		{"sorted in any key order", rangeq.Request{Target: rangeq.ByMod}, wire.ScanResponse{Flags: wire.ScanMore, KVs: kvs("e", "c", "x")}, true},
		{"sorted past the sort bound", rangeq.Request{Target: rangeq.ByMod, Offset: MaxSortKeys - 1}, wire.ScanResponse{Flags: wire.ScanMore, KVs: kvs("e")}, false},
		{"sorted up to the sort bound", rangeq.Request{Target: rangeq.ByMod, Offset: MaxSortKeys - 1}, wire.ScanResponse{KVs: kvs("e")}, true},
	} {
		if err := checkPage(&tc.q, &tc.page); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestWithSortKeyAscendIsKeyOrder: WithSort(SortByKey, SortAscend) asks
// for nothing the server does not do anyway (as clientv3's WithSort), so
// the request carries no extension an older server would refuse.
func TestWithSortKeyAscendIsKeyOrder(t *testing.T) {
	for _, tc := range []struct {
		target   SortTarget
		order    SortOrder
		extended bool
	}{
		{SortByKey, SortAscend, false},
		{SortByKey, SortNone, false},
		{SortByKey, SortDescend, true},
		{SortByModRevision, SortNone, true},
	} {
		var o readOptions
		WithSort(tc.target, tc.order)(&o)
		q := rangeq.Request{Target: rangeq.Target(o.scan.target), Order: rangeq.Order(o.scan.order)}
		if q.Extended() != tc.extended {
			t.Errorf("WithSort(%d, %d): extended %v", tc.target, tc.order, q.Extended())
		}
	}
}
