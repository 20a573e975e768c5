package client

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/table"
)

// TestMissNotFakedByMoveThenRemoval is the interleaving of
// docs/design/one-round-trip-gets.md §5.5: a key moves from its second
// bucket to its first while round trip 1 reads them (so neither copy holds
// it), then, after round trip 2 has read the header and before it reads the
// buckets, an update of the key that does not fit marks the region
// incomplete and takes the key out of the region (server/apply.go). The
// node still holds the key, so the GET must not answer "not found"; layout
// 2 does, because its miss proof checks the incomplete flag only in the
// header reads, which the second bucket reads may follow.
//
// It fails on layout 2 today and is skipped until step 1 of that
// document's plan (rule M4) lands; KVD_SHOW_MISS_HOLE=1 runs it.
func TestMissNotFakedByMoveThenRemoval(t *testing.T) {
	if os.Getenv("KVD_SHOW_MISS_HOLE") == "" {
		t.Skip("known hole in layout 2's miss proof (docs/design/one-round-trip-gets.md §5.5); set KVD_SHOW_MISS_HOLE=1 to run")
	}
	r := newRig(t)
	r.put("k", "v1")
	r.lease(time.Hour)
	if _, err := r.c.nodeFor(context.Background(), fakeAddr); err != nil {
		t.Fatal(err)
	}
	b1, b2 := table.Buckets(table.Hash([]byte("k")), r.tbl.Header().Buckets)
	r.moveSlot("k", b1, b2) // start in b2, read second (the table's clock is stopped: long ago)
	r.f.begin(func(batch, op int) {
		switch {
		case batch == 1 && op == 2:
			// Round trip 1 read H1 and b1 (no k); k moves to b1 before b2 is read.
			if !r.moveSlot("k", b2, b1) {
				t.Error("could not move k")
			}
		case batch == 2 && op == 1:
			// Round trip 2 read H2 (complete); an update of k that does not
			// fit: the server flags the region and deletes k from it.
			r.tbl.SetIncomplete(true)
			if ok, err := r.tbl.Delete([]byte("k")); !ok || err != nil {
				t.Errorf("delete k: %v %v", ok, err)
			}
		}
	})
	got := r.get("k", Linearizable)
	trace, _ := r.f.end()
	if got == answerNotFound {
		t.Fatalf("GET k answered not found while the node holds k (READ batches %v)", trace)
	}
}
