package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/transport/tcp"
)

func rangeKeyList(r *client.RangeResponse) string {
	var parts []string
	for _, kv := range r.KVs {
		parts = append(parts, string(kv.Key))
	}
	return strings.Join(parts, " ")
}

// sortFixture writes, under s/, keys whose versions, create and mod
// revisions and values differ, and returns the revision before the last
// write (which rewrote s/a).
func sortFixture(t *testing.T, c *client.Client) uint64 {
	t.Helper()
	ctx := context.Background()
	for _, kv := range [][2]string{{"s/a", "3"}, {"s/b", "1"}, {"s/c", "2"}, {"s/a", "4"}, {"s/c", "0"}, {"s/d", "9"}, {"s/a", "5"}} {
		if err := c.Put(ctx, []byte(kv[0]), []byte(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.Prefix(ctx, []byte("s/"), client.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return r.Revision - 1
}

// TestRangeSortsFiltersAndCounts: Range's sort, filters, limit and count,
// as etcd's, served by a server at the latest revision and at a past one.
// The fixture, by key: a (create 1, mod 7, version 3, "5"), b (2, 2, 1,
// "1"), c (3, 5, 2, "0"), d (6, 6, 1, "9").
func TestRangeSortsFiltersAndCounts(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	c := txnClient(t, s)
	ctx := context.Background()
	before := sortFixture(t, c)
	for _, tc := range []struct {
		name  string
		opts  []client.ReadOption
		want  string
		count uint64
		more  bool
	}{
		{"by key descending", []client.ReadOption{client.WithSort(client.SortByKey, client.SortDescend)}, "s/d s/c s/b s/a", 4, false},
		{"by version", []client.ReadOption{client.WithSort(client.SortByVersion, client.SortNone)}, "s/b s/d s/c s/a", 4, false},
		{"by create descending", []client.ReadOption{client.WithSort(client.SortByCreateRevision, client.SortDescend)}, "s/d s/c s/b s/a", 4, false},
		{"by mod", []client.ReadOption{client.WithSort(client.SortByModRevision, client.SortAscend)}, "s/b s/c s/d s/a", 4, false},
		{"by value descending", []client.ReadOption{client.WithSort(client.SortByValue, client.SortDescend)}, "s/d s/a s/b s/c", 4, false},
		{"by value keys only", []client.ReadOption{client.WithSort(client.SortByValue, client.SortNone), client.WithKeysOnly()}, "s/c s/b s/a s/d", 4, false},
		{"limit counts the range", []client.ReadOption{client.WithLimit(1)}, "s/a", 4, true},
		{"limit without count", []client.ReadOption{client.WithLimit(1), client.WithoutCount()}, "s/a", 1, true},
		{"filter without count", []client.ReadOption{client.WithMinModRev(6), client.WithoutCount()}, "s/a s/d", 2, false},
		{"sorted limit", []client.ReadOption{client.WithSort(client.SortByModRevision, client.SortDescend), client.WithLimit(2)}, "s/a s/d", 4, true},
		{"min mod", []client.ReadOption{client.WithMinModRev(5)}, "s/a s/c s/d", 4, false},
		{"max mod", []client.ReadOption{client.WithMaxModRev(5)}, "s/b s/c", 4, false},
		{"min create", []client.ReadOption{client.WithMinCreateRev(3)}, "s/c s/d", 4, false},
		{"max create with limit", []client.ReadOption{client.WithMaxCreateRev(3), client.WithLimit(2)}, "s/a s/b", 4, true},
		{"at a past revision", []client.ReadOption{client.WithRev(before), client.WithSort(client.SortByModRevision, client.SortDescend)}, "s/d s/c s/a s/b", 4, false},
		{"filter at a past revision", []client.ReadOption{client.WithRev(before), client.WithMinModRev(5)}, "s/c s/d", 4, false},
	} {
		r, err := c.Prefix(ctx, []byte("s/"), tc.opts...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := rangeKeyList(r); got != tc.want || r.Count != tc.count || r.More != tc.more {
			t.Errorf("%s: %s (count %d, more %v), want %s (count %d, more %v)", tc.name, got, r.Count, r.More, tc.want, tc.count, tc.more)
		}
	}
}

// TestRangeSortedAndDescendingPagesPastOneReply: a sorted or descending
// Range larger than one reply is paged by the client (by offset, or by
// key downwards) into exactly the order and count of one evaluation.
func TestRangeSortedAndDescendingPagesPastOneReply(t *testing.T) {
	s := floodServer(t, Config{Knobs: Knobs{ScanBounds: rangeq.Bounds{Keys: 3}}}, tcp.Config{})
	c := txnClient(t, s)
	ctx := context.Background()
	var want []string
	for i := range 10 {
		k := fmt.Sprintf("p/%02d", i)
		if err := c.Put(ctx, []byte(k), []byte(fmt.Sprint(9-i))); err != nil {
			t.Fatal(err)
		}
		want = append(want, k)
	}
	for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
		want[i], want[j] = want[j], want[i]
	}
	for _, tc := range []struct {
		name string
		opts []client.ReadOption
		n    int
		more bool
	}{
		{"descending", []client.ReadOption{client.WithSort(client.SortByKey, client.SortDescend)}, 10, false},
		{"by value", []client.ReadOption{client.WithSort(client.SortByValue, client.SortAscend)}, 10, false},
		{"by mod descending, limit", []client.ReadOption{client.WithSort(client.SortByModRevision, client.SortDescend), client.WithLimit(7)}, 7, true},
		{"descending, limit", []client.ReadOption{client.WithSort(client.SortByKey, client.SortDescend), client.WithLimit(8)}, 8, true},
	} {
		r, err := c.Prefix(ctx, []byte("p/"), tc.opts...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := rangeKeyList(r); got != strings.Join(want[:tc.n], " ") || r.Count != 10 || r.More != tc.more {
			t.Errorf("%s: %s (count %d, more %v), want %s (count 10, more %v)", tc.name, got, r.Count, r.More, strings.Join(want[:tc.n], " "), tc.more)
		}
	}
}

// TestRangeSortRefusedPastItsBound: a sort by anything but the key holds
// its matches in memory, so a range matching more than the bound is
// refused, naming the limit, while the same range in key order pages,
// and a filter that narrows it within the bound is served.
func TestRangeSortRefusedPastItsBound(t *testing.T) {
	s := floodServer(t, Config{Knobs: Knobs{ScanBounds: rangeq.Bounds{SortKeys: 4}}}, tcp.Config{})
	c := txnClient(t, s)
	ctx := context.Background()
	for i := range 6 {
		if err := c.Put(ctx, []byte(fmt.Sprintf("b/%d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Prefix(ctx, []byte("b/"), client.WithSort(client.SortByModRevision, client.SortDescend))
	if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "limits.MaxSortKeys") {
		t.Fatalf("sort of 6 keys within 4: %v, want ErrBadRequest naming limits.MaxSortKeys", err)
	}
	if r, err := c.Prefix(ctx, []byte("b/"), client.WithSort(client.SortByKey, client.SortDescend)); err != nil || len(r.KVs) != 6 {
		t.Fatalf("descending key order of 6 keys: %v", err)
	}
	r, err := c.Prefix(ctx, []byte("b/"), client.WithSort(client.SortByModRevision, client.SortDescend), client.WithMinModRev(3))
	if err != nil || len(r.KVs) != 4 || r.Count != 6 {
		t.Fatalf("sort of 4 of 6 keys within 4: %v", err)
	}
}
