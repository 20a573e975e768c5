package table

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// revealWhenDue ends tab's hiding phase if it is in one and RevealIn
// allows, as a server's rebuild does once its keys are placed: churn tests
// that Reset call it as they go.
func revealWhenDue(t *testing.T, tab *Table) {
	t.Helper()
	if err := tab.Reveal(); err != nil && !errors.Is(err, ErrTooEarly) {
		t.Fatal(err)
	}
}

// TestRebuildHidesUntilReveal: between Reset and Reveal no record reads
// live, to a reader or to Get, though keys are placed and moved (moves
// that reuse arena bytes at once); atomic groups leave their records
// hidden; the flag stays set; Reveal is refused until the inline grace
// period has passed since the last such reuse, and inside a group; then
// every key reads live with its value, and later Puts are live at once. A
// second Reset in the middle of a hiding phase (a failed rebuild run
// again) takes the hidden records down like live ones.
func TestRebuildHidesUntilReveal(t *testing.T) {
	t.Parallel()
	tab, mem, clk := newTable(t, 64<<10, inlineCfg) // 8 buckets: 62 keys need moves
	var keys []string
	for i := range 62 {
		keys = append(keys, fmt.Sprintf("k%02d", i))
	}
	reversed := slices.Clone(keys)
	slices.Reverse(reversed)
	value := func(k string, ver uint64) []byte { return pattern(20+int(Hash([]byte(k))%60), byte(ver)) }
	put := func(k string, ver uint64) {
		t.Helper()
		if err := tab.Put([]byte(k), value(k, ver), mv(ver)); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	for _, k := range keys {
		put(k, 1)
	}
	clk.Advance(inlineCfg.Grace)

	// A rebuild that fails after 20 keys: they stay hidden.
	tab.Reset()
	clk.Advance(tab.PendingClearsIn())
	clk.Advance(tab.ArenaLimboClearsIn())
	for _, k := range reversed[:20] {
		put(k, 2)
		checkNoneLive(t, tab, mem, keys)
	}
	// Run again: Reset takes the hidden records down like live ones (the
	// flag has been set for the grace period: their slots clear at once).
	tab.Reset()
	if st := tab.Stats(); st.Keys != 0 || st.SlotsPending != 0 {
		t.Fatalf("after a second Reset: %+v", st)
	}
	for _, k := range keys {
		checkAbsent(t, tab, mem, k)
	}
	clk.Advance(tab.ArenaLimboClearsIn())
	moves := tab.Stats().Moves
	for i, k := range reversed {
		put(k, 3)
		if i == 30 { // an atomic group's records stay hidden too
			tab.BeginAtomic()
			tab.Withhold([]byte(keys[0]))
			tab.Withhold([]byte(k))
			put(keys[0], 3)
			put(k, 3)
			if err := tab.Reveal(); !errors.Is(err, ErrTooEarly) {
				t.Fatalf("Reveal inside an atomic group: %v", err)
			}
			tab.EndAtomic()
		}
		checkNoneLive(t, tab, mem, keys)
	}
	if tab.Stats().Moves == moves {
		t.Fatal("no key moved in the rebuild: the test checks too little")
	}
	d := tab.RevealIn()
	if d != inlineCfg.InlineGrace { // the clock stood still while keys moved
		t.Fatalf("RevealIn = %v after moves freed arena bytes at once, want %v", d, inlineCfg.InlineGrace)
	}
	clk.Advance(d - 1)
	if err := tab.Reveal(); !errors.Is(err, ErrTooEarly) || !tab.Hiding() {
		t.Fatalf("Reveal %v before RevealIn: %v", d-1, err)
	}
	checkNoneLive(t, tab, mem, keys)
	clk.Advance(1)
	if err := tab.Reveal(); err != nil || tab.Hiding() {
		t.Fatalf("Reveal once due: %v", err)
	}
	for _, k := range keys {
		mustGet(t, tab, mem, []byte(k), value(k, 3), 3)
	}
	put(keys[1], 4) // an everyday Put: live at once
	mustGet(t, tab, mem, []byte(keys[1]), value(keys[1], 4), 4)
	tab.Stats() // invariants: no hidden record left
}

// checkNoneLive fails the test if any of keys reads live, to a reader
// (lookup) or to Get, or if a slot names a live record (checkHiding, run
// by Stats).
func checkNoneLive(t *testing.T, tab *Table, mem []byte, keys []string) {
	t.Helper()
	for _, k := range keys {
		if v, ver, err := lookup(mem, []byte(k)); err == nil {
			t.Fatalf("%s reads live (version %d, %d bytes) before Reveal", k, ver, len(v))
		}
		if _, _, ok, err := tab.Get([]byte(k)); ok || err != nil {
			t.Fatalf("Get(%s) before Reveal: %v, %v", k, ok, err)
		}
	}
	tab.Stats()
}
