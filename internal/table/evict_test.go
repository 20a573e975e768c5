package table

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// tenKeysTable is a table holding k0..k9, put a long time ago (no rule
// keeps anything waiting).
func tenKeysTable(t *testing.T) (*Table, []byte, *fakeClock) {
	t.Helper()
	tab, mem, clk := newTable(t, 64<<10, Config{Buckets: 64, Grace: testGrace})
	for i := range 10 {
		if err := tab.Put([]byte(fmt.Sprintf("k%d", i)), pattern(40, byte(i)), mv(uint64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(10 * testGrace)
	return tab, mem, clk
}

// evictTable is a table holding k0..k9, flagged complete long ago, with
// key k evicted at the clock's current time.
func evictTable(t *testing.T, k string) (*Table, []byte, *fakeClock, uint64) {
	t.Helper()
	tab, mem, clk := tenKeysTable(t)
	w := slotOf(t, tab, []byte(k))
	if !tab.Evict([]byte(k)) {
		t.Fatalf("Evict(%s): not in the table", k)
	}
	return tab, mem, clk, w
}

// checkPending: key k's slot still holds word w, whose record is dead, so
// a reader retries (it cannot prove a miss); the writer counts it out.
func checkPending(t *testing.T, tab *Table, mem []byte, k string, w uint64) {
	t.Helper()
	if got := slotOf(t, tab, []byte(k)); got != w {
		t.Fatalf("%s's slot is %#x, want %#x kept", k, got, w)
	}
	if _, _, err := lookup(mem, []byte(k)); !errors.Is(err, ErrDead) {
		t.Fatalf("a reader of %s meets %v, want its record dead", k, err)
	}
	if _, _, ok, err := tab.Get([]byte(k)); ok || err != nil {
		t.Fatalf("Get(%s) of an evicted key: %v, %v", k, ok, err)
	}
	if !tab.Header().Incomplete {
		t.Fatal("region flagged complete while a slot waits")
	}
}

// TestEvictKeepsSlotForGrace: rule M4 (evict.go, docs/layout.md "Taking a
// key out"). Evict flags the region and kills the key's record at once,
// but its slot is cleared only once the flag has been set for the grace
// period: a reader that read the flag clear just before must not find the
// key missing from both buckets. Until then the slot behaves as the
// key's: a Put updates it in place, a Delete clears it at once, Withhold
// and EndAtomic do not revive it, and the flag stays set.
func TestEvictKeepsSlotForGrace(t *testing.T) {
	t.Parallel()
	t.Run("cleared a grace period after the flag was set", func(t *testing.T) {
		tab, mem, clk, w := evictTable(t, "k3")
		if tab.Len() != 9 || tab.Stats().SlotsPending != 1 {
			t.Fatalf("after Evict: Len %d, stats %+v", tab.Len(), tab.Stats())
		}
		for _, d := range []time.Duration{0, testGrace / 2, testGrace/2 - 1} {
			clk.Advance(d)
			if err := tab.Put([]byte("other"), pattern(40, 9), mv(20)); err != nil { // a write: clears what is due
				t.Fatal(err)
			}
			tab.SetIncomplete(false) // refused while the slot waits
			checkPending(t, tab, mem, "k3", w)
		}
		clk.Advance(1)
		if err := tab.Put([]byte("other"), pattern(40, 9), mv(21)); err != nil {
			t.Fatal(err)
		}
		checkAbsent(t, tab, mem, "k3")
		if st := tab.Stats(); st.SlotsPending != 0 || st.BytesLimbo < RecordLen(2, 40) || st.Keys != 10 {
			t.Fatalf("after the slot cleared: %+v", st)
		}
		if tab.SetIncomplete(false); tab.Header().Incomplete {
			t.Fatal("flag refused to clear with nothing pending")
		}
	})
	t.Run("cleared at once if the flag has been set for the grace period", func(t *testing.T) {
		tab, mem, clk, _ := evictTable(t, "k3")
		clk.Advance(testGrace)
		tab.Evict([]byte("k4"))
		checkAbsent(t, tab, mem, "k3") // cleared by Evict's own pass
		checkAbsent(t, tab, mem, "k4")
	})
	t.Run("a Put updates the slot in place", func(t *testing.T) {
		tab, mem, _, w := evictTable(t, "k3")
		pos, _, _ := tab.find([]byte("k3"), Hash([]byte("k3")))
		if err := tab.Put([]byte("k3"), []byte("back"), mv(30)); err != nil {
			t.Fatal(err)
		}
		got, nw, _ := tab.find([]byte("k3"), Hash([]byte("k3")))
		if v, ver, err := lookup(mem, []byte("k3")); got != pos || nw == w || err != nil || string(v) != "back" || ver != 30 {
			t.Fatalf("k3 put back: slot %d (was %d), %q %d %v", got, pos, v, ver, err)
		}
		if st := tab.Stats(); st.SlotsPending != 0 || st.Keys != 10 {
			t.Fatalf("after the put: %+v", st)
		}
		if tab.SetIncomplete(false); tab.Header().Incomplete {
			t.Fatal("flag refused to clear with nothing pending")
		}
	})
	t.Run("a Delete clears it at once", func(t *testing.T) {
		tab, mem, _, _ := evictTable(t, "k3")
		if ok, err := tab.Delete([]byte("k3")); !ok || err != nil {
			t.Fatalf("Delete: %v %v", ok, err)
		}
		checkAbsent(t, tab, mem, "k3")
		if st := tab.Stats(); st.SlotsPending != 0 || st.Keys != 9 {
			t.Fatalf("after the delete: %+v", st)
		}
	})
	t.Run("an atomic group does not revive it", func(t *testing.T) {
		tab, mem, _, w := evictTable(t, "k3")
		tab.BeginAtomic()
		tab.Withhold([]byte("k3"))
		tab.Withhold([]byte("k4"))
		if err := tab.Put([]byte("k4"), []byte("new"), mv(40)); err != nil {
			t.Fatal(err)
		}
		tab.EndAtomic()
		checkPending(t, tab, mem, "k3", w)
	})
	t.Run("evicted within an atomic group", func(t *testing.T) {
		tab, mem, _, _ := evictTable(t, "k3")
		w := slotOf(t, tab, []byte("k4"))
		tab.BeginAtomic()
		tab.Withhold([]byte("k4"))
		tab.Evict([]byte("k4")) // its update did not fit
		tab.EndAtomic()
		checkPending(t, tab, mem, "k4", w)
	})
	t.Run("a write in flight keeps a slot when it clears", func(t *testing.T) {
		tab, _, clk, _ := evictTable(t, "k5")
		if err := tab.Reserve([]byte("k3"), 40); err != nil { // k3 is in the table: no slot held
			t.Fatal(err)
		}
		tab.Evict([]byte("k3"))
		clk.Advance(testGrace)
		if st := tab.Stats(); st.SlotsPending != 0 || st.SlotsHeld != 1 {
			t.Fatalf("after k3's slot cleared with a write in flight: %+v", st)
		}
		if err := tab.Put([]byte("k3"), pattern(40, 3), mv(50)); err != nil {
			t.Fatal(err)
		}
		tab.Unreserve([]byte("k3"), 40)
	})
}

// TestRemovalNeverFakesAMiss runs a server's use of a small, crowded table
// (writes that do not fit are evicted and repaired later, deletes,
// rebuilds with and without waiting for the old slots, atomic groups,
// compactions, moves) and checks rule M4 after every atomic store: a key
// the node holds is never missing from both its buckets unless the region
// has been flagged incomplete, without a break, for the grace period. That
// is what keeps a GET whose second header read saw the flag clear from
// proving a miss of such a key with bucket reads made after that header
// (docs/layout.md, "Taking a key out"; the client's
// TestMissNotFakedByMoveThenRemoval is one such GET). It also checks rule
// M3 (complete.go): the flag clears only a grace period after a held key
// last came back to its buckets while it was set.
func TestRemovalNeverFakesAMiss(t *testing.T) {
	t.Parallel()
	forInlineModes(t, Config{Buckets: 8, Grace: 10 * time.Millisecond}, func(t *testing.T, cfg Config, grow func(int) int) {
		removalNeverFakesAMiss(t, grow(32<<10), cfg)
	})
}

func removalNeverFakesAMiss(t *testing.T, size int, cfg Config) {
	grace := cfg.Grace
	tab, mem, clk := newTable(t, size, cfg)
	rng := rand.New(rand.NewPCG(11, 12))
	keys := make([][]byte, 80)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key-%02d", i))
	}
	held := map[string]bool{}    // the node's state
	missing := map[string]bool{} // held keys whose last write did not fit
	present := map[string]bool{} // keys in one of their buckets at the last store
	var setSince time.Time       // when the hook last saw the flag go from clear to set
	var backAt time.Time         // when a held key last came back to its buckets while the flag was set
	wasSet, back := false, false
	stores, removals, completions := 0, 0, 0
	var failure string
	tab.st.after = func() {
		stores++
		h, err := ParseHeader(mem)
		if err != nil || failure != "" {
			return
		}
		if h.Incomplete && !wasSet {
			setSince = clk.Now()
		}
		if !h.Incomplete && wasSet && back { // rule M3 (complete.go)
			if clk.Now().Sub(backAt) < grace {
				failure = fmt.Sprintf("store %d: flag cleared %v after a held key came back while it was set", stores, clk.Now().Sub(backAt))
			}
			back = false
			completions++
		}
		wasSet = h.Incomplete
		for _, key := range keys {
			k := string(key)
			_, _, err := lookup(mem, key)
			in := !errors.Is(err, errMiss) // in one of its buckets: a reader cannot prove it missing
			switch {
			case !held[k] || in:
			case !h.Incomplete:
				// (A write that never fitted leaves a held key missing too:
				// the flag must say so.)
				failure = fmt.Sprintf("store %d: %s, which the node holds, is missing from a region flagged complete", stores, k)
			case present[k] && clk.Now().Sub(setSince) < grace:
				failure = fmt.Sprintf("store %d: %s, which the node holds, left its buckets %v after the flag was set",
					stores, k, clk.Now().Sub(setSince))
			case present[k]:
				removals++
			}
			if held[k] && in && !present[k] && h.Incomplete {
				backAt, back = clk.Now(), true
			}
			present[k] = in
		}
	}
	version := uint64(0)
	put := func(k []byte) { // the server's apply of a PUT (internal/mirror/apply.go)
		version++
		value := pattern([]int{8, 60, 300}[rng.IntN(3)], byte(version))
		// A new key is the node's once its write is applied: when the Put
		// returns, or, if it did not fit, from Evict's first store on.
		if err := tab.Put(k, value, mv(version)); err == nil {
			held[string(k)] = true
			delete(missing, string(k))
			return
		} else if !errors.Is(err, ErrNoSpace) {
			t.Fatal(err)
		}
		held[string(k)] = true
		tab.Evict(k)
		missing[string(k)] = true
	}
	repair := func() { // the server's repair pass
		for k := range missing {
			version++
			if tab.Put([]byte(k), pattern(8, byte(version)), mv(version)) == nil {
				delete(missing, k)
			}
		}
		if len(missing) == 0 {
			tab.SetIncomplete(false)
		}
	}
	for op := 0; op < churnOps(6000) && failure == ""; op++ {
		k := keys[rng.IntN(len(keys))]
		switch r := rng.IntN(100); {
		case r < 55:
			put(k)
		case r < 70:
			delete(held, string(k)) // the node's state first: the region follows
			delete(missing, string(k))
			if _, err := tab.Delete(k); err != nil {
				t.Fatal(err)
			}
		case r < 76:
			tab.BeginAtomic()
			group := [][]byte{k, keys[rng.IntN(len(keys))]}
			for _, g := range group {
				tab.Withhold(g)
			}
			for _, g := range group {
				put(g)
			}
			tab.EndAtomic()
		case r < 78:
			// A rebuild (internal/mirror/rebuild.go): Reset, and, half the time,
			// the wait for the old slots; then every held key again.
			tab.Reset()
			if rng.IntN(2) == 0 {
				clk.Advance(tab.PendingClearsIn())
			}
			clear(missing)
			for k := range held {
				put([]byte(k))
			}
			clk.Advance(tab.RevealIn())
			revealWhenDue(t, tab)
		case r < 90:
			clk.Advance(time.Duration(rng.IntN(4)) * time.Millisecond)
			repair()
		case r < 95:
			clk.Advance(grace)
			tab.Compact(1 << 20)
		default:
			clk.Advance(time.Millisecond)
		}
	}
	if failure != "" {
		t.Fatal(failure)
	}
	st := tab.Stats()
	t.Logf("%d stores checked; %d held keys taken out after the wait; %d moves; %d flag clears after keys came back",
		stores, removals, st.Moves, completions)
	if removals < 100 || st.Moves < 100 || completions < 10 {
		t.Fatal("the test took too few held keys out of the region, or moved too few: it checks too little")
	}
}
