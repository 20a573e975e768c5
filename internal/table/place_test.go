package table

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// placeIn writes key=value into bucket b directly (a test's way to build an
// exact bucket layout), as a Put of a new key would.
func placeIn(t *testing.T, tab *Table, key, value []byte, b uint32) {
	t.Helper()
	n := RecordLen(len(key), len(value))
	off, ok := tab.alloc.alloc(n)
	if !ok || tab.spare(b) == 0 {
		t.Fatalf("placeIn %q: no room in bucket %d", key, b)
	}
	encodeRecord(tab.mem[off:off+n], key, value, mv(1))
	storeWord(tab.mem, tab.emptyIn(b), Slot{Offset: off, Len: n, FP: Fingerprint(Hash(key))}.Word())
	tab.records++
	tab.payload += n
}

// keysFor returns n keys whose two buckets (of nb) are exactly {x, y}.
func keysFor(prefix string, nb, x, y uint32, n int) [][]byte {
	var out [][]byte
	for i := 0; len(out) < n; i++ {
		k := []byte(fmt.Sprintf("%s-%d", prefix, i))
		b1, b2 := Buckets(Hash(k), nb)
		if b1 == x && b2 == y || b1 == y && b2 == x {
			out = append(out, k)
		}
	}
	return out
}

// bucketOf is the bucket whose slot holds key (which must be in the table).
func bucketOf(t *testing.T, tab *Table, key []byte) uint32 {
	t.Helper()
	pos, _, ok := tab.find(key, Hash(key))
	if !ok {
		t.Fatalf("%q not in the table", key)
	}
	b, _ := tab.hdr.slotIndex(pos)
	return b
}

// fillAroundK fills a table of nb = 4 buckets around key K, placed in
// bucket 0 with 1 as its other bucket: bucket 0 holds K and 7 keys of
// buckets {0, 3}, and buckets 1, 2 and 3 are full of keys that can move
// only among themselves and 0. So a new key of buckets {0, 3} fits only if
// K moves to 1, and then a new key of {1, 2} only if K moves back.
func fillAroundK(t *testing.T, tab *Table, nb uint32) {
	t.Helper()
	for _, x := range keysFor("a", nb, 0, 3, 7) {
		placeIn(t, tab, x, nil, 0)
	}
	for _, x := range keysFor("d", nb, 3, 0, 8)[:8] {
		placeIn(t, tab, x, nil, 3)
	}
	for _, x := range keysFor("b", nb, 1, 2, 7) {
		placeIn(t, tab, x, nil, 1)
	}
	for _, x := range keysFor("c", nb, 2, 1, 15)[7:15] {
		placeIn(t, tab, x, nil, 2)
	}
}

// TestMoveMakesRoomAndWaitsGrace builds buckets where a new key fits only
// if key K moves to its other bucket, then a second new key fits only if K
// moves back: the first move happens at once; the second only after the
// grace period (a key moved twice within one GET could fake a miss), unless
// the table is being rebuilt.
func TestMoveMakesRoomAndWaitsGrace(t *testing.T) {
	t.Parallel()
	for _, rebuild := range []bool{false, true} {
		t.Run(fmt.Sprintf("rebuild=%v", rebuild), func(t *testing.T) {
			const nb = 4
			tab, mem, clk := newTable(t, 64<<10, Config{Buckets: nb, Grace: testGrace})
			if rebuild {
				tab.SetIncomplete(true)
				tab.Reset()
			}
			k := keysFor("K", nb, 0, 1, 1)[0]
			placeIn(t, tab, k, []byte("k"), 0)
			fillAroundK(t, tab, nb)
			x := keysFor("X", nb, 0, 3, 1)[0]
			if err := tab.Put(x, []byte("x"), mv(2)); err != nil {
				t.Fatalf("X needs K to move: %v", err)
			}
			if err := tab.Reveal(); err != nil { // no arenas: nothing was freed at once
				t.Fatal(err)
			}
			if b := bucketOf(t, tab, k); b != 1 || tab.Stats().Moves != 1 {
				t.Fatalf("K in bucket %d after %d moves, want bucket 1 after 1", b, tab.Stats().Moves)
			}
			if v, _, err := lookup(mem, k); err != nil || string(v) != "k" {
				t.Fatalf("K after its move: %q, %v", v, err)
			}
			if _, err := tab.Delete(x); err != nil {
				t.Fatal(err)
			}
			y := keysFor("Y", nb, 1, 2, 1)[0]
			clk.Advance(testGrace - 1)
			err := tab.Put(y, []byte("y"), mv(3))
			if rebuild {
				if err != nil || bucketOf(t, tab, k) != 0 {
					t.Fatalf("a rebuild moves K back at once: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("Y within the grace period of K's move: %v, want no space", err)
			}
			if err := tab.CanPut(y, 1); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("CanPut(Y) within grace: %v", err)
			}
			clk.Advance(1)
			if err := tab.Put(y, []byte("y"), mv(3)); err != nil {
				t.Fatalf("Y after the grace period: %v", err)
			}
			if b := bucketOf(t, tab, k); b != 0 {
				t.Fatalf("K in bucket %d, want it moved back to 0", b)
			}
			if v, _, err := lookup(mem, k); err != nil || string(v) != "k" {
				t.Fatalf("K after moving back: %q, %v", v, err)
			}
		})
	}
}

// twoRoundGet is one GET as client/onesided.go does it, against memory a
// writer is changing: round 1 reads the header and both buckets (slot words
// and arena), round 2 the header, both buckets again and every
// out-of-place record whose fingerprint matched in round 1; an inline
// candidate is verified from round 1's bucket bytes. A miss is trusted only
// if the two reads of the slot words are equal, the headers show the same
// state and the region is not flagged incomplete. Within a round the reads
// run in a random order, so nothing here depends on a READ batch executing
// in order. both reports that round 1 found the key in both buckets (it
// read mid-move: the same word, or for an inline record two copies).
func twoRoundGet(mem []byte, clk *fakeClock, grace time.Duration, key, buf []byte, r *rand.Rand) (value []byte, res readResult, late, both bool) {
	start := clk.ns.Load()
	hash := Hash(key)
	var h1, h2 [HeaderSize]byte
	snapshot(h1[:], mem, 0)
	hdr, err := ParseHeader(h1[:])
	if err != nil {
		return nil, readRetry, false, false
	}
	bb := int(hdr.BucketBytes)
	bk1 := [2][]byte{make([]byte, bb), make([]byte, bb)}
	bk2 := [2][]byte{make([]byte, bb), make([]byte, bb)}
	b1, b2 := Buckets(hash, hdr.Buckets)
	round := func(h *[HeaderSize]byte, bk [2][]byte, first bool) {
		reads := []func(){
			func() { snapshot(bk[0], mem, hdr.BucketOffset(b1)) },
			func() { snapshot(bk[1], mem, hdr.BucketOffset(b2)) },
		}
		if !first {
			reads = append(reads, func() { snapshot(h[:], mem, 0) })
		}
		r.Shuffle(len(reads), func(i, j int) { reads[i], reads[j] = reads[j], reads[i] })
		for _, read := range reads {
			read()
		}
	}
	round(&h1, bk1, true)
	type cand struct {
		w      uint64
		bucket int
	}
	var cands []cand
	var words [2][]uint64
	for b := range 2 {
		for i := range SlotsPerBucket {
			w := leWord(bk1[b][i*SlotSize:])
			if w != 0 && DecodeSlot(w).FP == Fingerprint(hash) {
				cands = append(cands, cand{w, b})
				words[b] = append(words[b], w)
			}
		}
	}
	for _, w := range words[0] {
		both = both || slices.Contains(words[1], w)
	}
	round(&h2, bk2, false)
	var recs [2 * SlotsPerBucket][]byte
	for i, c := range cands {
		if IsInline(c.w) {
			continue
		}
		s := DecodeSlot(c.w)
		if !hdr.InArea(s) {
			return nil, readRetry, false, both
		}
		recs[i] = buf[i*MaxRecord/16:][:s.Len]
		copy(recs[i], mem[s.Offset:s.Offset+s.Len])
	}
	if !SameState(h1[:], h2[:]) {
		return nil, readRetry, false, both
	}
	late = time.Duration(clk.ns.Load()-start) >= grace/2
	var hit []byte
	var found [2]bool
	for i, c := range cands {
		var v []byte
		var err error
		if IsInline(c.w) {
			v, _, err = verInl(bk1[c.bucket][BucketSize:], key, DecodeInlineSlot(c.w), nil)
		} else {
			v, _, err = verRec(recs[i], key, DecodeSlot(c.w))
		}
		switch {
		case err == nil:
			hit, found[c.bucket] = v, true
		case errors.Is(err, ErrKeyMismatch):
		default:
			return nil, readRetry, late, both
		}
	}
	both = both || found[0] && found[1]
	if hit != nil {
		return hit, readHit, late, both
	}
	if !bytes.Equal(bk1[0][:BucketSize], bk2[0][:BucketSize]) || !bytes.Equal(bk1[1][:BucketSize], bk2[1][:BucketSize]) || hdr.Incomplete {
		return nil, readRetry, late, both
	}
	return nil, readMiss, late, both
}

// TestMovesNeverFakeAMiss keeps a near-full table busy making room for new
// keys (so keys move between their buckets all the time) while readers GET
// keys that are never deleted, with the two-round protocol. Each move
// pauses between its two stores so that readers read mid-move. No reader
// may trust a miss of a key that was there all along. Run with -race (the
// invariants then also check every move's order and its grace period).
func TestMovesNeverFakeAMiss(t *testing.T) {
	t.Parallel()
	const (
		grace = 4 * time.Millisecond // of the writer's clock, 1ms per op
		nb    = 64
	)
	forInlineModes(t, Config{Buckets: nb, Grace: grace}, func(t *testing.T, cfg Config, grow func(int) int) {
		movesNeverFakeAMiss(t, grow(1<<20), cfg)
	})
}

func movesNeverFakeAMiss(t *testing.T, size int, cfg Config) {
	const (
		resident = 320 // of 512 slots, never deleted
		readers  = 2
		ops      = 12000
	)
	grace := cfg.Grace
	tab, mem, clk := newTable(t, size, cfg)
	keys := make([][]byte, resident)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("resident-%d", i))
		if err := tab.Put(keys[i], keys[i], mv(1)); err != nil {
			t.Fatal(err)
		}
	}
	var done atomic.Bool
	var reads atomic.Int64
	var hits, midMove, fakeMisses atomic.Int64
	tab.testMidMove = func() { // let the readers read mid-move, for a while
		// Until enough reads have landed mid-move, wait long for them (on
		// a loaded machine readers may not run within a short pause); then
		// briefly, so that the test stays short.
		wait := 300 * time.Microsecond
		if midMove.Load() < 100 {
			wait = 20 * time.Millisecond
		}
		deadline := time.Now().Add(wait)
		for n := reads.Load() + 3*readers; reads.Load() < n && time.Now().Before(deadline); { // some reads begin and end mid-move
		}
	}
	var wg sync.WaitGroup
	for id := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(id), 7))
			buf := make([]byte, MaxRecord)
			for !done.Load() {
				k := keys[r.IntN(resident)]
				v, res, late, both := twoRoundGet(mem, clk, grace, k, buf, r)
				reads.Add(1)
				if both {
					midMove.Add(1)
				}
				switch {
				case res == readMiss && !late:
					fakeMisses.Add(1)
					t.Errorf("reader %d trusted a miss of %s, which was never deleted", id, k)
				case res == readHit && !bytes.Equal(v, k):
					t.Errorf("reader %d read %q for %s", id, v, k)
				case res == readHit:
					hits.Add(1)
				}
			}
		}()
	}
	r := rand.New(rand.NewPCG(3, 3))
	var churn []string
	full := 0
	for i := 0; i < ops && fakeMisses.Load() == 0; i++ {
		clk.Advance(time.Millisecond)
		if len(churn) > 0 && (r.IntN(3) == 0 || len(churn) > 200) {
			j := r.IntN(len(churn))
			if _, err := tab.Delete([]byte(churn[j])); err != nil {
				t.Fatal(err)
			}
			churn[j] = churn[len(churn)-1]
			churn = churn[:len(churn)-1]
			continue
		}
		k := fmt.Sprintf("churn-%d", i)
		switch err := tab.Put([]byte(k), nil, mv(uint64(i))); {
		case errors.Is(err, ErrNoSpace):
			full++
		case err != nil:
			t.Fatal(err)
		default:
			churn = append(churn, k)
		}
	}
	done.Store(true)
	wg.Wait()
	st := tab.Stats()
	t.Logf("%d moves, %d full; readers: %d reads, %d hits, %d read mid-move", st.Moves, full, reads.Load(), hits.Load(), midMove.Load())
	if st.Moves < 1000 || midMove.Load() < 50 || hits.Load() < 1000 {
		t.Fatalf("the test did not exercise moves under readers enough")
	}
	for _, k := range keys {
		if v, _, err := lookup(mem, k); err != nil || !bytes.Equal(v, k) {
			t.Fatalf("%s at the end: %v", k, err)
		}
	}
}

// admit stores key=value as a leader does: Reserve, Put (the apply), then
// Unreserve. It returns Reserve's error.
func admit(tab *Table, key, value []byte, version uint64) error {
	if err := tab.Reserve(key, len(value)); err != nil {
		return err
	}
	defer tab.Unreserve(key, len(value))
	if err := tab.Put(key, value, mv(version)); err != nil {
		panic(fmt.Sprintf("a reserved Put failed: %v", err))
	}
	return nil
}

type rebuildCase struct {
	name     string
	size     int
	cfg      Config
	valueLen func(r *rand.Rand) int
	admitted bool // fill through Reserve (a leader's admission), else plain Puts
	// arenasHold: with arenas, the records at their record-area size
	// would not fit the record area (checked).
	arenasHold bool
}

var rebuildCases = []rebuildCase{
	{"small values, buckets fill", 256 << 10, Config{}, func(r *rand.Rand) int { return r.IntN(24) }, true, false},
	{"small values, plain puts past the key capacity", 256 << 10, Config{}, func(r *rand.Rand) int { return r.IntN(24) }, false, false},
	{"16 buckets", 64 << 10, Config{Buckets: 16}, func(r *rand.Rand) int { return r.IntN(40) }, false, false},
	{"mixed values, area fills", 512 << 10, Config{Buckets: 512}, func(r *rand.Rand) int { return r.IntN(3000) }, true, false},
	{"16 B to 64 KiB", 2 << 20, Config{Buckets: 64}, func(r *rand.Rand) int {
		return []int{16, 100, 4000, 64 << 10}[r.IntN(4)]
	}, false, false},
	// With arenas, a record area of 8 KiB holds a tenth of these records
	// out of place: the table's capacity rests on its arenas, and the
	// rebuild must put every one inline again.
	{"small records, arenas hold them", 8<<10 + 128 + 64*BucketSize, Config{Buckets: 64}, func(r *rand.Rand) int {
		return 40 + r.IntN(58) // inline at InlineMax 176 (values up to 97 bytes with 8-byte keys)
	}, false, true},
}

// fillDeleteRefill fills tab until it refuses writes, then deletes a share
// of the keys and refills, a few times, and returns what it holds.
func fillDeleteRefill(t *testing.T, tab *Table, clk *fakeClock, c rebuildCase, r *rand.Rand) map[string][]byte {
	t.Helper()
	stored := map[string][]byte{}
	next := 0
	put := func(k string, v []byte) error {
		if c.admitted {
			return admit(tab, []byte(k), v, uint64(next))
		}
		return tab.Put([]byte(k), v, mv(uint64(next)))
	}
	for round := range 4 {
		for fails := 0; fails < 20; {
			clk.Advance(time.Millisecond)
			next++
			k := fmt.Sprintf("k%07d", r.IntN(1e7))
			if _, ok := stored[k]; ok {
				continue
			}
			v := pattern(c.valueLen(r), byte(next))
			switch err := put(k, v); {
			case errors.Is(err, ErrNoSpace):
				fails++
			case err != nil:
				t.Fatal(err)
			default:
				stored[k] = v
			}
		}
		if round == 3 {
			break
		}
		for _, k := range slices.Sorted(maps.Keys(stored)) { // map order would make the run a lottery
			if r.IntN(10) < 3 {
				if _, err := tab.Delete([]byte(k)); err != nil {
					t.Fatal(err)
				}
				delete(stored, k)
			}
		}
		clk.Advance(tab.LimboClearsIn())
	}
	return stored
}

// orders are adversarial and plain orders to rebuild keys in.
func orders(keys []string, nb uint32, r *rand.Rand) map[string][]string {
	out := map[string][]string{}
	sorted := slices.Sorted(slices.Values(keys))
	out["key order"] = sorted
	out["reverse key order"] = slices.Clone(sorted)
	slices.Reverse(out["reverse key order"])
	out["random"] = slices.Clone(keys)
	r.Shuffle(len(keys), func(i, j int) { out["random"][i], out["random"][j] = out["random"][j], out["random"][i] })
	// Keys of the most contested bucket pairs first, and last.
	load := map[uint32]int{}
	for _, k := range keys {
		b1, b2 := Buckets(Hash([]byte(k)), nb)
		load[b1]++
		load[b2]++
	}
	contest := func(k string) int {
		b1, b2 := Buckets(Hash([]byte(k)), nb)
		return load[b1] + load[b2]
	}
	byContest := slices.Clone(sorted)
	slices.SortStableFunc(byContest, func(a, b string) int { return cmp.Compare(contest(b), contest(a)) })
	out["most contested first"] = byContest
	out["most contested last"] = slices.Clone(byContest)
	slices.Reverse(out["most contested last"])
	// Grouped by first bucket: every key of a bucket arrives together.
	byBucket := slices.Clone(sorted)
	slices.SortStableFunc(byBucket, func(a, b string) int {
		x, _ := Buckets(Hash([]byte(a)), nb)
		y, _ := Buckets(Hash([]byte(b)), nb)
		return cmp.Compare(x, y)
	})
	out["by first bucket"] = byBucket
	return out
}

// rebuild refills tab with stored, in order, as the server does after a
// restart or a snapshot install (internal/mirror/rebuild.go): Reset (which flags the
// region incomplete and starts the hiding phase), wait for the old slots
// to clear and for the arenas' limbo to drain, wait for the record area's
// limbo too if the large records need it, Put every key, wait RevealIn,
// Reveal, flag complete. It fails the test if any key does not fit, if a
// small record is not inline afterwards, or if the rebuild spilled any.
func rebuild(t *testing.T, tab *Table, stored map[string][]byte, order []string) {
	t.Helper()
	tab.Reset()
	defer func(now func() time.Time) { tab.now = now }(tab.now)
	wait := func(d time.Duration) {
		now := tab.now().Add(d)
		tab.now = func() time.Time { return now }
	}
	wait(tab.PendingClearsIn())
	wait(tab.ArenaLimboClearsIn())
	var need uint64
	for k, v := range stored {
		if !tab.FitsInline(len(k), len(v)) {
			need += RecordLen(len(k), len(v))
		}
	}
	if st := tab.Stats(); need > st.LargestFree {
		wait(tab.LimboClearsIn())
	}
	spills := tab.Stats().Spills
	for i, k := range order {
		if err := tab.Put([]byte(k), stored[k], mv(uint64(i))); err != nil {
			t.Fatalf("rebuild: key %d of %d (%s) did not fit: %v (stats %+v)", i, len(order), k, err, tab.Stats())
		}
	}
	wait(tab.RevealIn())
	if err := tab.Reveal(); err != nil {
		t.Fatal(err)
	}
	checkInline(t, tab, stored)
	if st := tab.Stats(); st.Spills != spills {
		t.Fatalf("the rebuild spilled %d small records", st.Spills-spills)
	}
	tab.SetIncomplete(false)
}

// checkInline fails the test if a small record of stored is not inline.
func checkInline(t *testing.T, tab *Table, stored map[string][]byte) {
	t.Helper()
	for k, v := range stored {
		if tab.FitsInline(len(k), len(v)) && !IsInline(slotOf(t, tab, []byte(k))) {
			t.Fatalf("%s (%d-byte value) is out of place after the rebuild (stats %+v)", k, len(v), tab.Stats())
		}
	}
}

// TestRebuildFitsAfterFillDeleteRefill: a table that was filled until it
// refused writes, then churned (delete some, refill), is rebuilt, both
// into a fresh region of the same size (a restart) and in place (a
// snapshot install), with its keys in plain and adversarial orders: every
// key fits, every time.
func TestRebuildFitsAfterFillDeleteRefill(t *testing.T) {
	t.Parallel()
	for _, m := range inlineModes {
		t.Run(m.name, func(t *testing.T) {
			for _, c := range rebuildCases {
				c.cfg = withInline(c.cfg, m.inlineMax)
				c.size += c.cfg.Buckets * int(c.cfg.withDefaults().bucketBytes()-BucketSize)
				t.Run(c.name, func(t *testing.T) { rebuildFits(t, c) })
			}
		})
	}
}

func rebuildFits(t *testing.T, c rebuildCase) {
	r := rand.New(rand.NewPCG(21, 22))
	tab, mem, clk := newTable(t, c.size, c.cfg)
	stored := fillDeleteRefill(t, tab, clk, c, r)
	st := tab.Stats()
	t.Logf("%d keys (%.3f of %d slots, key capacity %d), %d of %d bytes, %d moves, %d inline bytes, %d spills",
		st.Keys, float64(st.Keys)/float64(tab.hdr.Buckets*SlotsPerBucket), tab.hdr.Buckets*SlotsPerBucket,
		st.KeyCapacity, st.BytesUsed, st.BytesArea, st.Moves, st.ArenaUsed, st.Spills)
	var need uint64
	for k, v := range stored {
		need += RecordLen(len(k), len(v))
	}
	if c.arenasHold && c.cfg.InlineMax > 0 && need <= st.BytesArea {
		t.Fatalf("setup: the records need %d bytes out of place, the record area has %d: the arenas hold nothing it could not", need, st.BytesArea)
	}
	keys := slices.Sorted(maps.Keys(stored))
	for name, order := range orders(keys, tab.hdr.Buckets, r) {
		fresh, fmem, _ := newTable(t, c.size, c.cfg)
		rebuild(t, fresh, stored, order)
		checkStored(t, fresh, fmem, stored)
		t.Logf("%s: restart fits (%d moves)", name, fresh.Stats().Moves)
	}
	rebuild(t, tab, stored, orders(keys, tab.hdr.Buckets, r)["random"])
	checkStored(t, tab, mem, stored)
}

// TestReservationsNeverOverfill admits writes until the table refuses one,
// with none applied yet (as pipelined PUTs are), then applies them in a
// random order, some updates after a delete of their key, while writes
// nobody reserved for (a follower's, say) try to take the room: every
// admitted write fits, and once every admission has ended nothing stays
// reserved.
func TestReservationsNeverOverfill(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		size     int
		cfg      Config
		valueLen func(r *rand.Rand) int
	}{
		{"bytes", 128 << 10, Config{Buckets: 128}, func(r *rand.Rand) int { return r.IntN(2000) }},
		{"slots", 64 << 10, Config{Buckets: 16}, func(r *rand.Rand) int { return r.IntN(8) }},
		{"big values", 1 << 20, Config{Buckets: 16}, func(r *rand.Rand) int { return 16 + r.IntN(64<<10) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			forInlineModes(t, c.cfg, func(t *testing.T, cfg Config, grow func(int) int) {
				reservationsNeverOverfill(t, grow(c.size), cfg, c.valueLen)
			})
		})
	}
}

func reservationsNeverOverfill(t *testing.T, size int, cfg Config, valueLen func(r *rand.Rand) int) {
	r := rand.New(rand.NewPCG(5, 5))
	tab, mem, clk := newTable(t, size, cfg)
	stored := map[string][]byte{}
	for i := range 20 { // some keys to update
		k := fmt.Sprintf("old-%d", i)
		stored[k] = pattern(valueLen(r), 1)
		if err := tab.Put([]byte(k), stored[k], mv(1)); err != nil {
			t.Fatal(err)
		}
	}
	type write struct {
		key   string
		value []byte
	}
	var admitted []write
	for fails := 0; fails < 50; {
		k := fmt.Sprintf("new-%d", r.IntN(1000))
		switch r.IntN(4) {
		case 0:
			k = fmt.Sprintf("old-%d", r.IntN(20))
		case 1:
			if len(admitted) > 0 { // a second write of a key in flight
				k = admitted[r.IntN(len(admitted))].key
			}
		}
		v := pattern(valueLen(r), byte(len(admitted)))
		if err := tab.Reserve([]byte(k), len(v)); err != nil {
			if !errors.Is(err, ErrNoSpace) {
				t.Fatal(err)
			}
			fails++
			continue
		}
		admitted = append(admitted, write{k, v})
	}
	t.Logf("%d writes admitted; %+v", len(admitted), tab.Stats())
	// Nothing unreserved fits now: no new key, no record longer than what is left.
	if err := tab.Put([]byte("intruder"), pattern(4000, 1), mv(1)); err == nil {
		t.Logf("an unreserved Put still fit (room was left): %+v", tab.Stats())
		tab.Delete([]byte("intruder"))
	}
	r.Shuffle(len(admitted), func(i, j int) { admitted[i], admitted[j] = admitted[j], admitted[i] })
	for i, w := range admitted {
		clk.Advance(time.Millisecond)
		if r.IntN(8) == 0 {
			if _, err := tab.Delete([]byte(w.key)); err != nil {
				t.Fatal(err)
			}
			delete(stored, w.key)
		}
		if r.IntN(10) == 0 { // a write nobody reserved for
			k := fmt.Sprintf("intruder-%d", i)
			if tab.Put([]byte(k), pattern(valueLen(r), 3), mv(1)) == nil {
				stored[k] = pattern(valueLen(r), 3)
				tab.Delete([]byte(k))
				delete(stored, k)
			}
		}
		if r.IntN(6) != 0 { // else: collapsed into a later write of the key, or never applied
			if err := tab.Put([]byte(w.key), w.value, mv(uint64(i+2))); err != nil {
				t.Fatalf("admitted write %d of %d (%s, %d bytes) did not fit: %v", i, len(admitted), w.key, len(w.value), err)
			}
			stored[w.key] = w.value
		}
		tab.Unreserve([]byte(w.key), len(w.value))
	}
	st := tab.Stats()
	if st.BytesReserved != 0 || st.SlotsHeld != 0 || len(tab.resv) != 0 {
		t.Fatalf("after every admission ended: %+v, %d keys with reservations", st, len(tab.resv))
	}
	checkStored(t, tab, mem, stored)
}

// TestReserveRefusesAtKeyCapacity: admission stops new keys at 15/16 of the
// slots (updates still pass), and Fill reaches 1 there.
func TestReserveRefusesAtKeyCapacity(t *testing.T) {
	t.Parallel()
	tab, _, _ := newTable(t, 1<<20, Config{Buckets: 32})
	capacity := KeyCapacity(32)
	if capacity != 240 || tab.Stats().KeyCapacity != capacity {
		t.Fatalf("key capacity %d, stats %d", capacity, tab.Stats().KeyCapacity)
	}
	var err error
	n := 0
	for ; err == nil; n++ {
		err = admit(tab, []byte(fmt.Sprintf("k%d", n)), pattern(10, 1), 1)
	}
	n-- // the refused one
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "key capacity") || n != capacity {
		t.Fatalf("refused after %d new keys: %v", n, err)
	}
	if st := tab.Stats(); st.Keys != capacity || st.Fill() != 1 || st.BytesReserved != 0 || st.SlotsHeld != 0 {
		t.Fatalf("stats %+v, fill %v", st, st.Fill())
	}
	if err := admit(tab, []byte("k0"), pattern(20, 2), 2); err != nil {
		t.Fatalf("an update at the key capacity: %v", err)
	}
	if err := tab.Put([]byte("unadmitted"), nil, mv(3)); err != nil {
		t.Fatalf("a Put past the key capacity (a follower never refuses): %v", err)
	}
	if _, err := tab.Delete([]byte("unadmitted")); err != nil {
		t.Fatal(err)
	}
	// New keys in flight count too: one slot below the capacity, one new
	// key is admitted and the next is not, though neither was applied.
	if _, err := tab.Delete([]byte("k0")); err != nil {
		t.Fatal(err)
	}
	if err := tab.Reserve([]byte("a"), 1); err != nil {
		t.Fatalf("new key below the capacity: %v", err)
	}
	if err := tab.Reserve([]byte("b"), 1); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("new key with the last slot below the capacity in flight: %v", err)
	}
	if st := tab.Stats(); st.SlotsHeld != 1 || st.Fill() != 1 {
		t.Fatalf("stats %+v", st)
	}
	tab.Unreserve([]byte("a"), 1)
	if st := tab.Stats(); st.SlotsHeld != 0 || st.BytesReserved != 0 {
		t.Fatalf("after Unreserve: %+v", st)
	}
}

// TestChurnSmallAndLargeValues rewrites a set of keys between 16 B and
// 64 KiB values (all large, all large again, all small, mixed), round after
// round, with at most about 60% of the area live and never an empty table:
// whenever the free bytes (not counting limbo) would hold a record, its
// write must succeed. The grace period is long against the writes, so a
// rewrite of every large value has the old ones in limbo and runs the area
// dry; then the space of large records is carved into small ones, and back
// into large ones. Without coalescing (the size-class allocator this
// replaced) the large round after a small one ran out of blocks.
func TestChurnSmallAndLargeValues(t *testing.T) {
	t.Parallel()
	const grace = 100 * time.Millisecond
	forInlineModes(t, Config{Buckets: 1024, Grace: grace}, func(t *testing.T, cfg Config, grow func(int) int) {
		churnSmallAndLarge(t, grow(4<<20), cfg)
	})
}

func churnSmallAndLarge(t *testing.T, size int, cfg Config) {
	grace := cfg.Grace
	tab, mem, clk := newTable(t, size, cfg)
	r := rand.New(rand.NewPCG(8, 8))
	const keys = 38 // 38 values of 64 KiB: 61% of the area
	stored := map[string][]byte{"anchor": []byte("never deleted")}
	if err := tab.Put([]byte("anchor"), stored["anchor"], mv(1)); err != nil {
		t.Fatal(err)
	}
	var written uint64
	refused := 0 // only while the free bytes, limbo aside, do not suffice
	put := func(k string, n int) {
		t.Helper()
		v := pattern(n, byte(written))
		clk.Advance(grace / 100)
		if err := tab.Put([]byte(k), v, mv(1)); err != nil {
			st := tab.Stats()
			if need := RecordLen(len(k), n); st.BytesFree >= need {
				t.Fatalf("after %d bytes written: put %s (%d bytes) refused with %d bytes free (%d in limbo): %v",
					written, k, n, st.BytesFree, st.BytesLimbo, err)
			}
			refused++
			return
		}
		stored[k] = v
		written += uint64(n)
	}
	for round := range 40 {
		for i := range keys {
			k := fmt.Sprintf("k%d", i)
			switch round % 4 {
			case 0, 1:
				put(k, 64<<10)
			case 2:
				put(k, 16)
			default:
				put(k, []int{16, 256, 4 << 10, 32 << 10, 64 << 10}[r.IntN(5)])
			}
		}
		clk.Advance(grace) // the round's limbo drains
	}
	st := tab.Stats()
	if written < 10*st.BytesArea || refused == 0 {
		t.Fatalf("only %d bytes written through a %d-byte area, %d refused: the area was not run dry", written, st.BytesArea, refused)
	}
	t.Logf("%d bytes written through a %d-byte area, %d writes refused while the free bytes did not suffice; %+v",
		written, st.BytesArea, refused, st)
	checkStored(t, tab, mem, stored)
}

// TestCoalescedSpaceServesLargeRecords: space freed as many small records
// serves one large record once its grace period has passed (without
// coalescing it stayed split into small blocks until the table emptied).
func TestCoalescedSpaceServesLargeRecords(t *testing.T) {
	t.Parallel()
	tab, mem, clk := newTable(t, 256<<10, Config{Buckets: 512, Grace: testGrace})
	stored, err := fillUntilFull(t, tab, func(int) int { return 40 })
	if !errors.Is(err, ErrNoSpace) {
		t.Fatal(err)
	}
	keep := "key-000000"
	for k := range stored {
		if k != keep {
			if _, err := tab.Delete([]byte(k)); err != nil {
				t.Fatal(err)
			}
			delete(stored, k)
		}
	}
	big := pattern(200<<10, 7)
	if err := tab.Put([]byte("big"), big, mv(2)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("a large record fit while the space was in limbo: %v", err)
	}
	if d := tab.LimboClearsIn(); d != testGrace {
		t.Fatalf("LimboClearsIn = %v, want %v", d, testGrace)
	}
	clk.Advance(testGrace)
	if d := tab.LimboClearsIn(); d != 0 {
		t.Fatalf("LimboClearsIn = %v after the grace period", d)
	}
	if err := tab.Put([]byte("big"), big, mv(2)); err != nil {
		t.Fatalf("a large record in coalesced space: %v (%+v)", err, tab.Stats())
	}
	stored["big"] = big
	checkStored(t, tab, mem, stored)
}

// TestCompactGathersFragmentedSpace: live small records left between the
// holes of deleted larger ones cut the free space up, so a record larger
// than any hole is refused though the free bytes would hold it many times.
// Compaction moves the small records out of one stretch; once its grace
// period has passed the large record fits, and every key reads as before.
func TestCompactGathersFragmentedSpace(t *testing.T) {
	t.Parallel()
	tab, mem, clk := newTable(t, 256<<10, Config{Buckets: 512, Grace: testGrace})
	stored := map[string][]byte{}
	var bigs []string
	for i := 0; ; i++ { // small and larger records in turn, until the area is full
		k, v := fmt.Sprintf("small-%04d", i), pattern(20, byte(i))
		if tab.Put([]byte(k), v, mv(1)) != nil {
			break
		}
		stored[k] = v
		k = fmt.Sprintf("big-%04d", i)
		if tab.Put([]byte(k), pattern(1000, byte(i)), mv(1)) != nil {
			break
		}
		bigs = append(bigs, k)
	}
	for _, k := range bigs { // a hole after every small record
		if _, err := tab.Delete([]byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(testGrace)
	st := tab.Stats()
	big := pattern(20<<10, 9)
	if err := tab.Put([]byte("huge"), big, mv(2)); !errors.Is(err, ErrNoSpace) || st.BytesFree < 4*uint64(len(big)) {
		t.Fatalf("want a fragmented table: %v, %+v", err, st)
	}
	if !tab.Fragmented() {
		t.Fatalf("not Fragmented: %+v", st)
	}
	for range 10 {
		moved := tab.Compact(st.BytesArea / 8)
		if tab.Compact(st.BytesArea/8) != 0 {
			t.Fatal("a second compaction within the grace period of the first")
		}
		checkStored(t, tab, mem, stored)
		clk.Advance(testGrace)
		if err := tab.Put([]byte("huge"), big, mv(2)); err == nil {
			stored["huge"] = big
			break
		}
		if moved == 0 {
			t.Fatalf("compaction moved nothing and the large record still does not fit: %+v", tab.Stats())
		}
	}
	if _, ok := stored["huge"]; !ok {
		t.Fatalf("the large record never fit: %+v", tab.Stats())
	}
	st = tab.Stats()
	t.Logf("after compaction: %+v", st)
	checkStored(t, tab, mem, stored)
}

// TestDeleteHoldsSlotForWritesInFlight: an update admitted while its key
// existed needs no slot, but if a delete of the key is applied first, the
// update's Put must still find one: the delete's slot is held for it, and
// writes nobody reserved for cannot take it.
func TestDeleteHoldsSlotForWritesInFlight(t *testing.T) {
	t.Parallel()
	tab, mem, _ := newTable(t, 64<<10, Config{Buckets: 2}) // every key has the same 16 slots
	stored := map[string][]byte{}
	for i := range 2*SlotsPerBucket - 1 {
		k := fmt.Sprintf("k%d", i)
		stored[k] = []byte(k)
		if err := tab.Put([]byte(k), stored[k], mv(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tab.Reserve([]byte("k0"), 5); err != nil { // an update in flight
		t.Fatal(err)
	}
	if st := tab.Stats(); st.SlotsHeld != 0 {
		t.Fatalf("an update holds a slot: %+v", st)
	}
	if _, err := tab.Delete([]byte("k0")); err != nil { // applied before it
		t.Fatal(err)
	}
	delete(stored, "k0")
	if st := tab.Stats(); st.SlotsHeld != 1 {
		t.Fatalf("the deleted key's slot is not held for its write in flight: %+v", st)
	}
	if err := tab.Put([]byte("x"), nil, mv(2)); err != nil { // the one free slot
		t.Fatal(err)
	}
	stored["x"] = []byte{}
	if err := tab.Put([]byte("y"), nil, mv(2)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("an unreserved Put took the held slot: %v", err)
	}
	if err := tab.Put([]byte("k0"), []byte("again"), mv(3)); err != nil {
		t.Fatalf("the update after the delete: %v", err)
	}
	stored["k0"] = []byte("again")
	tab.Unreserve([]byte("k0"), 5)
	if st := tab.Stats(); st.SlotsHeld != 0 || st.BytesReserved != 0 || st.Keys != 2*SlotsPerBucket {
		t.Fatalf("stats %+v", st)
	}
	checkStored(t, tab, mem, stored)
}
