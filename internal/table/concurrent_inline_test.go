package table

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The reader of layout 3 (docs/layout.md, "Reading"), as
// far as hits go: one READ of each of the key's buckets, slot words and
// arena together, whose words arrive in no promised order; inline
// candidates verified from those bytes by their tags (VerifyInline);
// out-of-place ones read in a second round trip. A GET that accepted arena
// bytes and took Gi/2 or more of the writer's clock is late (discarded),
// as is any other that took G/2 or more.

// snapshotScrambled copies n bytes at off from mem with 8-byte atomic
// loads in a random rotation and direction: an RDMA READ reads its words
// in no promised order.
func snapshotScrambled(dst []byte, mem []byte, off uint64, r *rand.Rand) {
	n := len(dst) / 8
	first, step := r.IntN(n), 1
	if r.IntN(2) == 0 {
		step = n - 1
	}
	for k, i := 0, first; k < n; k, i = k+1, (i+step)%n {
		w := loadWord(mem, off+uint64(8*i))
		for j := range 8 {
			dst[8*i+j] = byte(w >> (8 * j))
		}
	}
}

// inlineRead is what one GET (or a cached one) found.
type inlineRead struct {
	value     []byte
	version   uint64
	res       readResult
	usedArena bool // the accepted record was inline
}

// scanInline looks at one bucket's bytes (slot words and arena, as READ)
// for key: a live inline record of the key is a hit (the highest version
// if several); one dead, hidden or torn is a retry; out-of-place
// candidates are appended to oop for a second round trip.
func scanInline(bucket, key []byte, fp uint16, got *inlineRead, oop []uint64) []uint64 {
	for i := range SlotsPerBucket {
		w := leWord(bucket[i*SlotSize:])
		if w == 0 || DecodeSlot(w).FP != fp {
			continue
		}
		if !IsInline(w) {
			oop = append(oop, w)
			continue
		}
		v, ver, err := verInl(bucket[BucketSize:], key, DecodeInlineSlot(w), nil)
		switch {
		case err == nil:
			if got.res != readHit || ver > got.version {
				*got = inlineRead{value: v, version: ver, res: readHit, usedArena: true}
			}
		case errors.Is(err, ErrKeyMismatch):
		default:
			if got.res != readHit {
				got.res = readRetry
			}
		}
	}
	return oop
}

func leWord(b []byte) uint64 {
	var w uint64
	for j := 7; j >= 0; j-- {
		w = w<<8 | uint64(b[j])
	}
	return w
}

// inlineGet is an uncached GET of key (buckets nil) or a cached one
// (buckets: the one bucket the cached word was found in).
func inlineGet(mem []byte, clk *fakeClock, key []byte, only int, buf []byte, r *rand.Rand) (got inlineRead, late bool) {
	start := clk.ns.Load()
	var hb [HeaderSize]byte
	snapshot(hb[:], mem, 0)
	h, err := ParseHeader(hb[:])
	if err != nil {
		return inlineRead{res: readRetry}, false
	}
	hash := Hash(key)
	b1, b2 := Buckets(hash, h.Buckets)
	bs := []uint32{b1, b2}
	if only >= 0 {
		bs = []uint32{uint32(only)}
	}
	got.res = readMiss
	var oop []uint64
	for _, b := range bs {
		bucket := buf[:h.BucketBytes]
		snapshotScrambled(bucket, mem, h.BucketOffset(b), r)
		oop = scanInline(bucket, key, Fingerprint(hash), &got, oop)
	}
	if got.res == readMiss && only < 0 { // round trip 2: the out-of-place candidates
		for _, w := range oop {
			s := DecodeSlot(w)
			if !h.InArea(s) {
				return inlineRead{res: readRetry}, false
			}
			rec := buf[:s.Len]
			copy(rec, mem[s.Offset:s.Offset+s.Len])
			v, ver, err := verRec(rec, key, s)
			if errors.Is(err, ErrKeyMismatch) {
				continue
			}
			if err != nil {
				return inlineRead{res: readRetry}, false
			}
			got = inlineRead{value: append([]byte(nil), v...), version: ver, res: readHit}
			break
		}
	}
	if only >= 0 && got.res != readHit {
		return inlineRead{res: readRetry}, false
	}
	var again [HeaderSize]byte
	snapshot(again[:], mem, 0)
	if h2, err := ParseHeader(again[:]); err != nil || h2.Generation != h.Generation {
		return inlineRead{res: readRetry}, false
	}
	g := h.Grace()
	if got.usedArena {
		g = time.Duration(h.InlineGraceMillis) * time.Millisecond
	}
	return got, time.Duration(clk.ns.Load()-start) >= g/2
}

// smallValue is the value inlineChurn writes for key at
// version: 0 to 119 bytes, most of them inline.
func smallValue(key string, version uint64) []byte { return valueUpTo(key, version, 120) }

// inlineChurn (a case of TestConcurrentReadersNeverAcceptWrongValue)
// churns small values (most inline, some spilled or too large) through a
// table with arenas and a short inline grace period, with deletes, moves (few buckets), compactions and Resets,
// while readers GET concurrently with the layout 3 reader: words of a
// bucket read in scrambled order, inline records accepted only by their
// tags and crc, half of the GETs through a cached bucket. No value a
// reader verifies may differ from the one written for that key at that
// version; among GETs fast enough to accept, a key's version never goes
// back. Run with -race.
func inlineChurn(t *testing.T) {
	const (
		minOps  = 20000
		maxOps  = 40 * minOps
		minHits = 2000
		readers = 2
		nkeys   = 70
	)
	// 8 buckets of 8 slots for 70 keys: keys move. A grace period of a
	// few writer ops: blocks are reused under the readers' feet.
	cfg := Config{Buckets: 8, Grace: 4 * time.Millisecond, InlineMax: 176, InlineGrace: 2 * time.Millisecond}
	tab, mem, clk := newTable(t, 256<<10+8*1472, cfg)
	keys := make([][]byte, nkeys)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key-%d", i))
	}
	var done atomic.Bool
	var hits, arenaHits atomic.Int64
	var wg sync.WaitGroup
	for id := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(id), 7))
			last := make([]uint64, nkeys)
			cached := make([]int, nkeys) // bucket of the last hit, -1: none
			for i := range cached {
				cached[i] = -1
			}
			buf := make([]byte, MaxRecord)
			for !done.Load() {
				i := r.IntN(nkeys)
				got, late := inlineRead{res: readRetry}, false
				if cached[i] >= 0 && r.IntN(2) == 0 {
					got, late = inlineGet(mem, clk, keys[i], cached[i], buf, r)
				}
				if got.res != readHit {
					got, late = inlineGet(mem, clk, keys[i], -1, buf, r)
				}
				if got.res == readHit && !bytes.Equal(got.value, smallValue(string(keys[i]), got.version)) {
					t.Errorf("reader %d verified a wrong value for %s at version %d (late %v, inline %v)", id, keys[i], got.version, late, got.usedArena)
					return
				}
				if late || got.res != readHit {
					continue
				}
				if got.version < last[i] {
					t.Errorf("reader %d saw %s go back from version %d to %d", id, keys[i], last[i], got.version)
					return
				}
				last[i] = got.version
				cached[i] = bucketHolding(mem, keys[i])
				hits.Add(1)
				if got.usedArena {
					arenaHits.Add(1)
				}
			}
		}()
	}
	r := rand.New(rand.NewPCG(13, 14))
	model := map[string]uint64{}
	put := func(k []byte, v uint64) {
		err := tab.Put(k, smallValue(string(k), v), mv(v))
		if err != nil && !errors.Is(err, ErrNoSpace) {
			t.Fatal(err)
		}
		if err == nil {
			model[string(k)] = v
		}
	}
	v := uint64(0)
	for v < minOps || arenaHits.Load() < minHits && v < maxOps {
		v++
		clk.Advance(time.Millisecond)
		k := keys[r.IntN(nkeys)]
		switch {
		case v%7001 == 0:
			tab.Reset()
			clear(model)
		case v%97 == 0:
			tab.Compact(64 << 10)
		case r.IntN(5) == 0: // keys come and go: new keys need moves
			if _, err := tab.Delete(k); err != nil {
				t.Fatal(err)
			}
			delete(model, string(k))
		case r.IntN(50) == 0: // a hot key: its arena fills with superseded records, then spills
			for range 12 {
				v++
				put(k, v)
			}
		default:
			put(k, v)
		}
		if v%7001 > 300 { // a Reset's hiding phase lasts 300 ops, moves freeing bytes at once under the readers
			revealWhenDue(t, tab)
		}
		if v%5000 == 0 {
			tab.SetIncomplete(false)
		}
	}
	done.Store(true)
	wg.Wait()
	st := tab.Stats()
	t.Logf("writer: %d ops; readers: %d hits, %d inline; %+v", v, hits.Load(), arenaHits.Load(), st)
	clk.Advance(cfg.Grace) // nothing races now: every key reads as the model says
	revealWhenDue(t, tab)
	for _, k := range keys {
		got, _ := inlineGet(mem, clk, k, -1, make([]byte, MaxRecord), r)
		want, ok := model[string(k)]
		switch {
		case ok && (got.res != readHit || got.version != want || !bytes.Equal(got.value, smallValue(string(k), want))):
			t.Errorf("%s: final read %v version %d, want version %d", k, got.res, got.version, want)
		case !ok && got.res != readMiss:
			t.Errorf("%s: final read %v, want a miss", k, got.res)
		}
	}
	if arenaHits.Load() < minHits/2 || st.Spills == 0 || st.Moves == 0 {
		t.Fatalf("too few inline hits (%d), spills (%d) or moves (%d): the test checks too little", arenaHits.Load(), st.Spills, st.Moves)
	}
}

// bucketHolding is the bucket (of key's two) whose slot words hold a word
// with key's fingerprint now, or -1: what a reader caches with a hit.
func bucketHolding(mem, key []byte) int {
	h, err := ParseHeader(mem)
	if err != nil {
		return -1
	}
	hash := Hash(key)
	b1, b2 := Buckets(hash, h.Buckets)
	for _, b := range [2]uint32{b1, b2} {
		for i := range SlotsPerBucket {
			if w := loadWord(mem, h.SlotOffset(b, i)); w != 0 && DecodeSlot(w).FP == Fingerprint(hash) {
				return int(b)
			}
		}
	}
	return -1
}
