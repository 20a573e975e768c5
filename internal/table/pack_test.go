package table

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestRebuildPacksCutUpArenas restarts many filled and churned tables whose
// small records the arenas alone can hold, in every order of orders():
// each restart must put every small record inline, spilling none, and so
// must a rebuild in place. Without
// packing (pack.go), the holes a rebuild's own moves leave cut an arena's
// free bytes into runs too short for a record in about one fill in 25
// (most often in the "most contested last" order).
func TestRebuildPacksCutUpArenas(t *testing.T) {
	t.Parallel()
	c := rebuildCases[len(rebuildCases)-1] // small records, arenas hold them
	c.cfg = withInline(c.cfg, 176)
	c.size += c.cfg.Buckets * int(c.cfg.withDefaults().bucketBytes()-BucketSize)
	fills := 150
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
			packs += fresh.Stats().Packs
		}
		// In place, as a snapshot install does: the keys' old, dead
		// records are still named by their slots while the Puts run.
		before := tab.Stats().Packs
		order := orders(keys, tab.hdr.Buckets, r)["most contested last"]
		if !t.Run("", func(t *testing.T) { rebuild(t, tab, stored, order) }) {
			t.Fatalf("fill %d, rebuilt in place: see above", seed)
		}
		checkStored(t, tab, mem, stored)
		inPlace += tab.Stats().Packs - before
	}
	t.Logf("%d fills: %d arenas packed in restarts, %d in place", fills, packs, inPlace)
	if packs == 0 || inPlace == 0 {
		t.Fatal("no arena was packed: the test no longer reaches the case it is for")
	}
}

// TestPackUnderAnUpdate packs an arena in the middle of a Put that updates
// a key of that arena: the Put must retire its key's record where the pack
// left it, not where it was. The arena is laid out as a rebuild's moves
// can leave it (records spread out with short gaps between them), then one
// of its keys is written again with a record longer than any gap.
func TestPackUnderAnUpdate(t *testing.T) {
	t.Parallel()
	c := rebuildCases[len(rebuildCases)-1]
	c.cfg = withInline(c.cfg, 176)
	c.size += c.cfg.Buckets * int(c.cfg.withDefaults().bucketBytes()-BucketSize)
	tab, mem, clk := newTable(t, c.size, c.cfg)
	tab.Reset()                                                 // a fresh table's rebuild: hiding from here
	value := func(i int) []byte { return pattern(97, byte(i)) } // 176 inline bytes
	stored := map[string][]byte{}
	for i := range 300 {
		k := fmt.Sprintf("k%07d", i)
		if err := tab.Put([]byte(k), value(i), mv(uint64(i))); err != nil {
			t.Fatal(err)
		}
		stored[k] = value(i)
	}
	// The bucket with the most inline records.
	var b uint32
	var most int
	for u := range tab.hdr.Buckets {
		if n := inlineIn(tab, u); n > most {
			b, most = u, n
		}
	}
	// Spread its records out: the free units become most+1 gaps, each too
	// short for a 176-byte record. Slid from the last down, so none
	// overlaps a block still to be moved.
	a := &tab.arenas
	need := InlineLen(8, 97) / inlineWord
	gap := (a.units - uint64(most)*need) / uint64(most+1)
	if gap >= need || gap == 0 {
		t.Fatalf("setup: %d records of %d units leave gaps of %d in %d units", most, need, gap, a.units)
	}
	var pos []uint64
	for s := range SlotsPerBucket {
		if p := tab.hdr.SlotOffset(b, s); IsInline(loadWord(mem, p)) {
			pos = append(pos, p)
		}
	}
	slices.SortFunc(pos, func(x, y uint64) int {
		return int(tab.resolve(x, loadWord(mem, x)).off) - int(tab.resolve(y, loadWord(mem, y)).off)
	})
	markBits(a.taken, a.unit(b, 0), a.units, false)
	for i := len(pos) - 1; i >= 0; i-- {
		l := tab.resolve(pos[i], loadWord(mem, pos[i]))
		to := gap + uint64(i)*(need+gap)
		s := DecodeInlineSlot(loadWord(mem, pos[i]))
		buf := append([]byte(nil), tab.block(l)...)
		s.Tag = stores{}.copyInline(mem[tab.arenaBase(b)+to*inlineWord:][:l.n], buf)
		s.Offset = to * inlineWord
		storeWord(mem, pos[i], s.Word())
		markBits(a.taken, a.unit(b, to), l.n/inlineWord, true)
	}
	// Update the key of the first record: its new block fits no gap.
	key := tab.keyOf(pos[0], loadWord(mem, pos[0]))
	k := string(key)
	stored[k] = pattern(97, 0xee)
	if err := tab.Put(key, stored[k], mv(1000)); err != nil {
		t.Fatal(err)
	}
	if n := tab.Stats().Packs; n != 1 {
		t.Fatalf("%d arenas packed, want 1", n)
	}
	// Let the retired block's grace pass, then fill the arena's free
	// bytes: a block retired at the wrong place would be handed out over a
	// live record.
	clk.Advance(time.Second)
	for i := 0; inlineIn(tab, b) < SlotsPerBucket && i < 100000; i++ {
		k := fmt.Sprintf("j%07d", i)
		if b1, b2 := Buckets(Hash([]byte(k)), tab.hdr.Buckets); b1 != b && b2 != b {
			continue
		}
		if err := tab.Put([]byte(k), value(i), mv(uint64(2000+i))); err != nil {
			t.Fatal(err)
		}
		stored[k] = value(i)
	}
	clk.Advance(tab.RevealIn())
	if err := tab.Reveal(); err != nil {
		t.Fatal(err)
	}
	checkStored(t, tab, mem, stored)
}

// inlineIn counts bucket b's slots that name an inline record.
func inlineIn(tab *Table, b uint32) int {
	n := 0
	for s := range SlotsPerBucket {
		if IsInline(loadWord(tab.mem, tab.hdr.SlotOffset(b, s))) {
			n++
		}
	}
	return n
}
