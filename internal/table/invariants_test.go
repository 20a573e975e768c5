package table

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/invariants"
)

// TestInvariantsCatchModifiedRecord: a published record modified in place
// (what a writer bug reusing live space would do) is caught when it is
// retired, in builds with invariants on.
func TestInvariantsCatchModifiedRecord(t *testing.T) {
	t.Parallel()
	if !invariants.Enabled {
		t.Skip("SKIPPED: invariants are off in this build (run with -race or -tags invariants)")
	}
	tab, mem, _ := newTable(t, 64<<10, Config{})
	if err := tab.Put([]byte("k"), []byte("value"), mv(1)); err != nil {
		t.Fatal(err)
	}
	s := DecodeSlot(slotOf(t, tab, []byte("k")))
	mem[s.Offset+recKey+1] ^= 0xff // into the value, past the key
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "modified before it was retired") {
			t.Fatalf("no invariant panic for a modified live record: %v", r)
		}
	}()
	tab.Put([]byte("k"), []byte("new"), mv(2))
}

// expectInvariantPanic runs f and fails unless it panics with an invariant
// message containing want.
func expectInvariantPanic(t *testing.T, want string, f func()) {
	t.Helper()
	if !invariants.Enabled {
		t.Skip("SKIPPED: invariants are off in this build (run with -race or -tags invariants)")
	}
	defer func() {
		t.Helper()
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, want) {
			t.Fatalf("no invariant panic containing %q: %v", want, r)
		}
	}()
	f()
}

// TestInvariantsCatchEarlyMove: moving a key again within the grace period
// of its last move (which could let a reader trust a miss) is caught.
func TestInvariantsCatchEarlyMove(t *testing.T) {
	t.Parallel()
	tab, _, _ := newTable(t, 64<<10, Config{Buckets: 4, Grace: testGrace})
	if err := tab.Put([]byte("k"), nil, mv(1)); err != nil {
		t.Fatal(err)
	}
	pos, w, _ := tab.find([]byte("k"), Hash([]byte("k")))
	tab.stampMoved(pos) // as if it had just moved here
	b, s := tab.hdr.slotIndex(pos)
	expectInvariantPanic(t, "again within the grace period", func() {
		tab.checkMove(b, s, w, tab.emptyIn(b^1))
	})
}

// TestInvariantsCatchTakenReservedSlot: a placement that leaves a bucket
// fewer empty slots than it holds for writes in flight is caught.
func TestInvariantsCatchTakenReservedSlot(t *testing.T) {
	t.Parallel()
	tab, _, _ := newTable(t, 64<<10, Config{Buckets: 2})
	for i := range 2*SlotsPerBucket - 2 {
		if err := tab.Put([]byte(fmt.Sprintf("k%d", i)), nil, mv(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tab.Reserve([]byte("new"), 1); err != nil {
		t.Fatal(err)
	}
	if err := tab.Put([]byte("last"), nil, mv(1)); err != nil { // the last slot not held
		t.Fatal(err)
	}
	// A key written into the held slot, bypassing placement, as a bug would.
	g := tab.group([]byte("new"))
	key := []byte("intruder")
	n := RecordLen(len(key), 0)
	off, _ := tab.alloc.alloc(n)
	encodeRecord(tab.mem[off:off+n], key, nil, mv(1))
	storeWord(tab.mem, tab.emptyIn(uint32(g.held)), Slot{Offset: off, Len: n, FP: Fingerprint(Hash(key))}.Word())
	tab.records++
	tab.payload += n
	expectInvariantPanic(t, "holds 1 for reservations", func() { tab.Stats() })
}
