package table

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRebuildPacksCutUpArenas restarts many filled and churned tables whose
// small records the arenas alone can hold, in every order of orders():
// each restart must put every small record inline, spilling none, and so
// must a rebuild in place. Without
// packing (pack.go), the holes a rebuild's own moves leave cut an arena's
// free bytes into runs too short for a record in about one fill in 25
// (most often in the "most contested last" order).
func TestRebuildPacksCutUpArenas(t *testing.T) {
	c := rebuildCases[len(rebuildCases)-1] // small records, arenas hold them
	c.cfg = withInline(c.cfg, 144)
	c.size += c.cfg.Buckets * int(c.cfg.withDefaults().bucketBytes()-BucketSize)
	fills := 300
	if testing.Short() {
		fills = 60
	}
	var packs, inPlace uint64
	for seed := range uint64(fills) {
		r := rand.New(rand.NewPCG(seed, 7))
		tab, mem, clk := newTable(t, c.size, c.cfg)
		stored := fillDeleteRefill(t, tab, clk, c, r)
		keys := slices.Sorted(maps.Keys(stored))
		for _, name := range slices.Sorted(maps.Keys(orders(keys, tab.hdr.Buckets, r))) {
			order := orders(keys, tab.hdr.Buckets, rand.New(rand.NewPCG(seed, 8)))[name]
			fresh, fmem, _ := newTable(t, c.size, c.cfg)
			if !t.Run("", func(t *testing.T) { rebuild(t, fresh, stored, order) }) {
				t.Fatalf("fill %d, restart in %s order: see above", seed, name)
			}
			checkStored(t, fresh, fmem, stored)
			packs += fresh.packs
		}
		// In place, as a snapshot install does: the keys' old, dead
		// records are still named by their slots while the Puts run.
		before := tab.packs
		order := orders(keys, tab.hdr.Buckets, r)["most contested last"]
		if !t.Run("", func(t *testing.T) { rebuild(t, tab, stored, order) }) {
			t.Fatalf("fill %d, rebuilt in place: see above", seed)
		}
		checkStored(t, tab, mem, stored)
		inPlace += tab.packs - before
	}
	t.Logf("%d fills: %d arenas packed in restarts, %d in place", fills, packs, inPlace)
	if packs == 0 || inPlace == 0 {
		t.Fatal("no arena was packed: the test no longer reaches the case it is for")
	}
}
