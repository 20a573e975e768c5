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
// checks every location each key ever had after each store. Evictions
// leave slots naming dead records for a while (rule M4): a cached reader
// of such a record retries, and a slot-following one too.
func TestLiveRecordIsCurrent(t *testing.T) {
	tab, mem, clk := newTable(t, 64<<10, Config{Buckets: 8, Grace: 10 * time.Millisecond})
	rng := rand.New(rand.NewPCG(5, 6))
	keys := make([][]byte, 40)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key-%02d", i))
	}
	seen := make([]map[uint64]bool, len(keys)) // every slot word each key had
	for i := range seen {
		seen[i] = map[uint64]bool{}
	}
	note := func() {
		for i, k := range keys {
			if pos, w, ok := tab.find(k, Hash(k)); ok && pos != 0 {
				seen[i][w] = true
			}
		}
	}
	stores, accepted := 0, 0
	var failure string
	afterStore = func() {
		stores++
		if failure != "" {
			return
		}
		for i, k := range keys {
			for w := range seen[i] {
				s := DecodeSlot(w)
				_, ver, err := VerifyRecord(mem[s.Offset:s.Offset+s.Len], k, s)
				if err != nil {
					continue // a cached reader retries
				}
				accepted++
				_, cur, lerr := lookup(mem, k)
				if lerr != nil || cur != ver {
					failure = fmt.Sprintf("store %d: a cached reader of %s at offset %d accepts version %d; the slots say version %d, %v",
						stores, k, s.Offset, ver, cur, lerr)
					return
				}
			}
		}
	}
	defer func() { afterStore = nil }()
	version := uint64(1)
	sizes := []int{8, 40, 120}
	put := func(k []byte) {
		version++
		v := bytes.Repeat([]byte{byte(version)}, sizes[rng.IntN(len(sizes))])
		if err := tab.Put(k, v, version); err != nil && !errors.Is(err, ErrNoSpace) {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	for op := 0; op < 4000 && failure == ""; op++ {
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
	t.Logf("%d stores checked, %d cached reads accepted and right", stores, accepted)
	if accepted < 1000 {
		t.Fatalf("only %d cached reads accepted: the test checks too little", accepted)
	}
}
