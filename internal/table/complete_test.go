package table

import (
	"fmt"
	"testing"
	"time"
)

// completeTable is a table holding k0..k9, flagged complete long ago, then
// flagged incomplete a grace period ago (so rule M4 holds nothing back).
func completeTable(t *testing.T) (*Table, *fakeClock) {
	t.Helper()
	tab, _, clk := tenKeysTable(t)
	tab.SetIncomplete(true)
	clk.Advance(testGrace)
	return tab, clk
}

// checkFlag: CompleteIn is wantIn, and SetIncomplete(false) then leaves the
// flag set (wantSet) or clears it.
func checkFlag(t *testing.T, tab *Table, wantSet bool, wantIn time.Duration) {
	t.Helper()
	in := tab.CompleteIn()
	if tab.SetIncomplete(false); tab.Header().Incomplete != wantSet || in != wantIn {
		t.Fatalf("flag set %v after SetIncomplete(false), CompleteIn %v; want set %v, %v", tab.Header().Incomplete, in, wantSet, wantIn)
	}
}

// TestFlagClearsOnlyGraceAfterPlacement: rule M3 (complete.go). The
// incomplete flag clears only once the grace period has passed since the
// last key was placed while it was set; with no such placement it clears
// at once. A one-header miss proof relies on it: otherwise a held key put
// back and the flag cleared could both fall between a GET's second bucket
// reads and its header read.
func TestFlagClearsOnlyGraceAfterPlacement(t *testing.T) {
	put := func(t *testing.T, tab *Table, k string) {
		t.Helper()
		if err := tab.Put([]byte(k), []byte("v"), 99); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("a key placed while set holds the flag for the grace period", func(t *testing.T) {
		tab, clk := completeTable(t)
		put(t, tab, "new")
		checkFlag(t, tab, true, testGrace)
		clk.Advance(testGrace - 1)
		checkFlag(t, tab, true, 1)
		clk.Advance(1)
		checkFlag(t, tab, false, 0)
	})
	t.Run("the last placement counts", func(t *testing.T) {
		tab, clk := completeTable(t)
		put(t, tab, "a")
		clk.Advance(testGrace / 2)
		put(t, tab, "b")
		clk.Advance(testGrace / 2)
		checkFlag(t, tab, true, testGrace/2)
		clk.Advance(testGrace / 2)
		checkFlag(t, tab, false, 0)
	})
	t.Run("a key deleted and put back while set", func(t *testing.T) {
		tab, clk := completeTable(t)
		if _, err := tab.Delete([]byte("k3")); err != nil {
			t.Fatal(err)
		}
		put(t, tab, "k3")
		clk.Advance(testGrace - 1)
		checkFlag(t, tab, true, 1)
	})
	t.Run("no placement: clears at once", func(t *testing.T) {
		tab, _ := completeTable(t)
		put(t, tab, "k3") // an update keeps its slot: no placement
		if _, err := tab.Delete([]byte("k4")); err != nil {
			t.Fatal(err)
		}
		checkFlag(t, tab, false, 0)
	})
	t.Run("set and cleared at once with nothing placed", func(t *testing.T) {
		tab, _, _ := newTable(t, 64<<10, Config{Buckets: 64, Grace: testGrace})
		tab.SetIncomplete(true)
		checkFlag(t, tab, false, 0)
	})
	t.Run("an evicted key's kept slot updated in place is no placement", func(t *testing.T) {
		tab, _, _, _ := evictTable(t, "k3")
		put(t, tab, "k3")
		checkFlag(t, tab, false, 0)
	})
	t.Run("with slots pending (M4), the later wait counts", func(t *testing.T) {
		tab, _, clk, _ := evictTable(t, "k3")
		put(t, tab, "new")
		clk.Advance(testGrace / 2)
		put(t, tab, "new2")
		checkFlag(t, tab, true, testGrace) // M3's wait ends later than M4's
		clk.Advance(testGrace / 2)
		checkFlag(t, tab, true, testGrace/2) // k3's slot cleared; M3 still waits
		clk.Advance(testGrace / 2)
		checkFlag(t, tab, false, 0)
	})
	t.Run("a rebuild's keys", func(t *testing.T) {
		tab, clk := completeTable(t)
		clk.Advance(testGrace)
		tab.Reset()
		clk.Advance(tab.PendingClearsIn())
		for i := range 10 {
			put(t, tab, fmt.Sprintf("k%d", i))
		}
		checkFlag(t, tab, true, testGrace)
		clk.Advance(testGrace)
		checkFlag(t, tab, true, 0) // M3 is met, but the keys are hidden: the flag waits for Reveal
		if err := tab.Reveal(); err != nil {
			t.Fatal(err)
		}
		checkFlag(t, tab, false, 0)
	})
}
