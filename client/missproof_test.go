package client

import (
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/table"
)

// TestMissNotFakedByMoveThenRemoval is the interleaving that rule M4
// (docs/layout.md, "Writer rules") excludes: a key moves from its second
// bucket to its first while round trip 1 reads them (so neither copy holds
// it), then, after round trip 2 has read the header and before it reads the
// buckets, an update of the key that does not fit marks the region
// incomplete and takes the key out of the region (internal/mirror/apply.go). The
// node still holds the key, so the GET must not answer "not found", which
// it would if the slot were cleared at once: the miss proof checks the
// incomplete flag only in the header reads, which the second bucket reads
// may follow.
//
// The writer keeps the key's slot (its record dead) until the flag has
// been set for a grace period (table.Evict, rule M4 of docs/layout.md), so
// round trip 2 sees the key's slot in b1, which round trip 1 did not show,
// and the GET retries and ends in an RPC read. (The rig's table
// clock is stopped, so the grace period never passes here.)
func TestMissNotFakedByMoveThenRemoval(t *testing.T) {
	removals := []struct {
		name   string
		remove func(r *rig) // what the server does after round trip 2 read H2
	}{
		{"an update that does not fit", func(r *rig) {
			// The server flags the region and takes k out of it.
			if !r.tbl.Evict([]byte("k")) {
				t.Error("evict k: not in the region")
			}
		}},
		// A rebuild's first step (internal/mirror/rebuild.go): its keys come back
		// later, after round trip 2 has read the buckets.
		{"a rebuild", func(r *rig) { r.tbl.Reset() }},
	}
	for _, tc := range removals {
		t.Run(tc.name, func(t *testing.T) {
			r := newReadyRig(t)
			b1, b2 := table.Buckets(table.Hash([]byte("k")), r.tbl.Header().Buckets)
			r.moveSlot("k", b1, b2) // start in b2, read second (the table's clock is stopped: long ago)
			r.f.begin(func(batch, op int) {
				switch {
				case batch == 1 && op == 1:
					// Round trip 1 read b1 (no k); k moves to b1 before b2 is read.
					if !r.moveSlot("k", b2, b1) {
						t.Error("could not move k")
					}
				case batch == 2 && op == 1:
					// Round trip 2 read H2 (complete), not yet the buckets.
					tc.remove(r)
				}
			})
			got := r.get("k", Linearizable)
			trace, _ := r.f.end()
			if got == answerNotFound {
				t.Fatalf("GET k answered not found while the node holds k (READ batches %v)", trace)
			}
		})
	}
}

// TestRepairNeverFakesAMiss is rule M3 seen from a reader. A miss is proven
// with a single header read, in round trip 2, and that batch's READs may
// run in any order. Here the node holds k, but the region lacks it (an
// applied write that did not fit took it out a grace period ago), and
// round trip 2 runs its bucket READs first, then, before its header READ,
// the server repairs k and tries to mark the region complete. If the flag
// could clear then, the header would read clear after buckets without k,
// and the GET would answer "not found" for a key the node holds. The
// writer clears the flag only a grace period after the last key it placed
// while the flag was set (M3), so the header still shows it set, and the
// miss is asked by RPC.
func TestRepairNeverFakesAMiss(t *testing.T) {
	r := newReadyRig(t)
	if !r.tbl.Evict([]byte("k")) {
		t.Fatal("evict k: not in the region")
	}
	r.tclock.Add(int64(time.Minute)) // the rig's grace period: k's slot may clear
	r.tbl.Stats()                    // ... and does
	if _, _, ok, _ := r.tbl.Get([]byte("k")); ok {
		t.Fatal("k still in the region")
	}
	r.f.mu.Lock()
	r.f.reverse = func(batch int) bool { return batch == 2 }
	r.f.mu.Unlock()
	r.f.begin(func(batch, op int) {
		if batch == 2 && op == 2 { // round trip 2 read both buckets, not yet the header
			r.put("k", "v1") // the repair puts k back...
			r.tbl.SetIncomplete(false)
		}
	})
	got := r.get("k", Linearizable)
	trace, _ := r.f.end()
	if got == answerNotFound {
		t.Fatalf("GET k answered not found while the node holds k (READ batches %v)", trace)
	}
	if !r.tbl.Header().Incomplete {
		t.Error("the flag cleared right after a key was placed while it was set")
	}
}
