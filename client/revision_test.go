package client

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/server"
)

// TestDefaultLayoutGetsInOneRoundTrip: with kvd's default inline budget, an
// uncached GET of a 16 B or a 256 B value under a key of up to 32 bytes is
// one round trip of two READs (its two buckets), revision metadata and all.
func TestDefaultLayoutGetsInOneRoundTrip(t *testing.T) {
	for _, c := range []struct {
		key   string
		value int
	}{{"k", 16}, {"sixteen-byte-key", 16}, {"a-key-of-thirty-two-bytes-000000", 256}} {
		r := newRigWith(t, table.Config{InlineMax: server.DefaultTableInline})
		value := strings.Repeat("v", c.value)
		r.put(c.key, value)
		r.lease(time.Hour)
		r.connect()
		r.f.begin(nil)
		if got := r.get(c.key, Linearizable); got != value {
			t.Fatalf("get %s = %q", c.key, got)
		}
		if trace, rpcs := r.f.end(); !slices.Equal(trace, traceInlineHit) || len(rpcs) != 0 {
			t.Fatalf("%d-byte key, %d-byte value: READ batches %v and RPCs %v, want %v", len(c.key), c.value, trace, rpcs, traceInlineHit)
		}
	}
}

// TestOneSidedGetCarriesMetaAndRevision: a one-sided GET returns the
// revision metadata the key's record carries, after its first write and
// after its second, and answers at max(the header revision read before
// the record, the record's mod): the revision the client read at connect
// while it is the larger, the record's mod once a later write passed it,
// never a header revision read after the record (none is, here: the lease
// is not due). Out of place (two round trips) and inline (one).
func TestOneSidedGetCarriesMetaAndRevision(t *testing.T) {
	for _, inline := range []int{0, 384} {
		r := newRigWith(t, table.Config{InlineMax: inline, InlineGrace: time.Minute})
		key, lease := []byte("k"), uint64(4)
		first := revision.Meta{}.Next(5, lease)
		if err := r.tbl.Put(key, []byte("v1"), first); err != nil {
			t.Fatal(err)
		}
		r.tbl.SetRevision(7)
		r.lease(time.Hour)
		r.connect() // reads the header: revision 7
		check := func(want revision.Meta, wantRev uint64) {
			t.Helper()
			res, err := r.c.get(context.Background(), nil, key, []ReadOption{WithConsistency(Linearizable)})
			if err != nil || res.meta != want || res.rev != wantRev {
				t.Fatalf("inline %d: get = %+v at %d, %v; want %+v at %d", inline, res.meta, res.rev, err, want, wantRev)
			}
		}
		check(first, 7)
		second := first.Next(9, lease)
		if err := r.tbl.Put(key, []byte("v2"), second); err != nil {
			t.Fatal(err)
		}
		r.tbl.SetRevision(12) // not read by the client: it answers at the mod
		check(second, 9)
		if second.Version != 2 || second.Create != 5 {
			t.Fatalf("second write's metadata %+v", second)
		}
	}
}
