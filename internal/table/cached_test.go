package table

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestLiveRecordIsCurrent checks the writer's ordering that lets a reader
// with a cached location read the header and the record alone
// (docs/layout.md, "Reading"): at every atomic store the writer makes,
// every record a cached reader could accept (it reads live and intact, and
// holds the key asked for) carries the version a slot-following reader
// finds for that key at that same moment. It runs random puts of a few
// record sizes (so space is reused at the very offsets and lengths clients
// cached), deletes, moves between buckets, compactions, atomic groups and
// rebuilds, with the clock moved past the grace period now and then, and
// checks every location each key ever had after each store. With arenas
// a location is a slot word and the bucket that held it (an inline word
// names a block of that bucket's arena, and is verified there with its
// tag, as a reader holding the bucket's bytes would), and the stores
// include each tagged word of an inline record as it is written. Evictions
// leave slots naming dead records for a while (rule M4): a cached reader
// of such a record retries, and a slot-following one too.
func TestLiveRecordIsCurrent(t *testing.T) {
	t.Parallel()
	forInlineModes(t, Config{Buckets: 4, Grace: 10 * time.Millisecond}, func(t *testing.T, cfg Config, grow func(int) int) {
		liveRecordIsCurrent(t, grow(64<<10), cfg)
	})
}

// location is where a reader found a key's record: a slot word and its
// position (whose bucket an inline word's block is in).
type location struct{ pos, w uint64 }

// verifyLocation verifies what a cached reader of key at l would.
func verifyLocation(mem []byte, h Header, l location, key []byte) (uint64, error) {
	b, _ := h.slotIndex(l.pos)
	_, ver, err := verifyWord(mem, h, b, l.w, key)
	return ver, err
}

func liveRecordIsCurrent(t *testing.T, size int, cfg Config) {
	tab, mem, clk := newTable(t, size, cfg)
	rng := rand.New(rand.NewPCG(5, 6))
	keys := make([][]byte, 40) // more than the key capacity (30): keys move
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key-%02d", i))
	}
	seen := make([]map[location]bool, len(keys)) // every location each key had
	for i := range seen {
		seen[i] = map[location]bool{}
	}
	inline := 0
	note := func() {
		for i, k := range keys {
			if pos, w, ok := tab.find(k, Hash(k)); ok && pos != 0 {
				seen[i][location{pos, w}] = true
				if IsInline(w) {
					inline++
				}
			}
		}
	}
	stores, accepted := 0, 0
	var failure string
	tab.st.after = func() {
		stores++
		if failure != "" {
			return
		}
		for i, k := range keys {
			for l := range seen[i] {
				ver, err := verifyLocation(mem, tab.hdr, l, k)
				if err != nil {
					continue // a cached reader retries
				}
				accepted++
				_, cur, lerr := lookup(mem, k)
				if lerr != nil || cur != ver {
					failure = fmt.Sprintf("store %d: a cached reader of %s at %+v accepts version %d; the slots say version %d, %v",
						stores, k, l, ver, cur, lerr)
					return
				}
			}
		}
	}
	version := uint64(1)
	sizes := []int{8, 40, 120}
	put := func(k []byte) {
		version++
		v := bytes.Repeat([]byte{byte(version)}, sizes[rng.IntN(len(sizes))])
		if err := tab.Put(k, v, mv(version)); err != nil && !errors.Is(err, ErrNoSpace) {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	for op := 0; op < churnOps(4000) && failure == ""; op++ {
		k := keys[rng.IntN(len(keys))]
		switch r := rng.IntN(100); {
		case r < 56:
			put(k)
		case r < 59:
			// A write of k that did not fit: its record dies at once, its
			// slot stays until the flag has been set for the grace period
			// (evict.go); a later put updates it in place.
			tab.Evict(k)
		case r < 60:
			revealWhenDue(t, tab)    // ends a rebuild's hiding phase
			tab.SetIncomplete(false) // refused while slots wait
		case r < 80:
			if _, err := tab.Delete(k); err != nil {
				t.Fatal(err)
			}
		case r < 88:
			group := []([]byte){k, keys[rng.IntN(len(keys))], keys[rng.IntN(len(keys))]}
			tab.BeginAtomic()
			for _, g := range group {
				tab.Withhold(g)
			}
			for _, g := range group[:2] {
				put(g)
			}
			if !bytes.Equal(group[2], group[0]) && !bytes.Equal(group[2], group[1]) {
				if _, err := tab.Delete(group[2]); err != nil {
					t.Fatal(err)
				}
			}
			tab.EndAtomic()
		case r < 97:
			clk.Advance(11 * time.Millisecond) // limbo drains: space is reused
			tab.Compact(1 << 20)
			revealWhenDue(t, tab)
		case r < 98:
			tab.Reset()
			clk.Advance(11 * time.Millisecond)
			tab.SetIncomplete(false)
		default:
			clk.Advance(time.Millisecond)
		}
		note()
	}
	if failure != "" {
		t.Fatal(failure)
	}
	t.Logf("%d stores checked, %d cached reads accepted and right, %d inline locations; %+v", stores, accepted, inline, tab.Stats())
	if accepted < 1000 || cfg.InlineMax > 0 && inline < 1000 {
		t.Fatalf("only %d cached reads accepted, %d inline locations seen: the test checks too little", accepted, inline)
	}
}
