package client

import (
	"errors"
	"slices"
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

// TestRangeCurrentRevision: a read at a past revision asks the server for
// the store's current revision too (rangeq.Current) and returns it as
// CurrentRevision; a server that predates it refuses the flag, and the
// read is asked again without it, its revision read standing for the
// current one; a current revision below the revision read is a malformed
// reply. A read of the latest state does not ask: its revision is it.
func TestRangeCurrentRevision(t *testing.T) {
	page := func(current uint64) wire.Response {
		p := wire.ScanResponse{Flags: wire.ScanHasMeta, Count: 1,
			KVs: []wire.ScanKV{{Key: []byte("k"), Value: []byte("v"), Meta: revision.Meta{Create: 2, Mod: 3, Version: 1}}}}
		if current != 0 {
			p.Flags, p.Current = p.Flags|wire.ScanHasCurrent, current
		}
		return wire.Response{Version: 5, Value: wire.AppendScanResponse(nil, &p)}
	}
	for _, tc := range []struct {
		name    string
		opts    []ReadOption
		serve   func(q *rangeq.Request) wire.Response
		current uint64
		asked   []bool // whether each request set rangeq.Current
		bad     bool
	}{
		{"current", []ReadOption{WithRev(5)}, func(*rangeq.Request) wire.Response { return page(9) }, 9, []bool{true}, false},
		{"server predates it", []ReadOption{WithRev(5)}, func(q *rangeq.Request) wire.Response {
			if q.Flags&rangeq.Current != 0 {
				return wire.Response{Status: wire.StatusBadRequest, Value: []byte("malformed range request: unknown flags 0x10")}
			}
			return page(0)
		}, 5, []bool{true, false}, false},
		{"current below the revision read", []ReadOption{WithRev(5)}, func(*rangeq.Request) wire.Response { return page(4) }, 0, []bool{true}, true},
		{"latest", nil, func(*rangeq.Request) wire.Response { return page(0) }, 5, []bool{false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			var asked []bool
			r.f.mu.Lock()
			r.f.scan = func(req *wire.Request) wire.Response {
				var q rangeq.Request
				if err := rangeq.Decode(req.Value, &q); err != nil {
					return wire.Response{Status: wire.StatusBadRequest, Value: []byte(err.Error())}
				}
				asked = append(asked, q.Flags&rangeq.Current != 0)
				return tc.serve(&q)
			}
			r.f.mu.Unlock()
			res, err := r.c.Range(t.Context(), []byte("a"), []byte("z"), append(tc.opts, WithConsistency(Serializable))...)
			switch {
			case tc.bad:
				if !errors.Is(err, errMalformedReply) {
					t.Fatalf("got %+v, %v; want a malformed reply", res, err)
				}
			case err != nil:
				t.Fatal(err)
			case res.Revision != 5 || res.CurrentRevision != tc.current || len(res.KVs) != 1:
				t.Fatalf("revision %d, current %d, %d keys; want 5, %d, 1", res.Revision, res.CurrentRevision, len(res.KVs), tc.current)
			}
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("requests asked for the current revision: %v, want %v", asked, tc.asked)
			}
		})
	}
}
