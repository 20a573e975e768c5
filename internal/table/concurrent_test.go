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

// snapshot copies n bytes at off from mem with 8-byte atomic loads, as a
// one-sided READ would (it never sees half a word).
func snapshot(dst []byte, mem []byte, off uint64) {
	for i := uint64(0); i < uint64(len(dst)); i += 8 {
		w := loadWord(mem, off+i)
		for j := range uint64(8) {
			dst[i+j] = byte(w >> (8 * j))
		}
	}
}

type readResult int

const (
	readHit readResult = iota
	readMiss
	readRetry
)

// clientGet is one GET as docs/layout.md "Reading" describes it, against
// memory a writer is changing: header, both buckets, matching records,
// header again. Slot words and headers are read atomically; record bytes
// are copied plainly and may be torn. late reports that the GET took half
// the grace period or more of the writer's clock, so a client would retry;
// the result is returned anyway so that tests can check that even then no
// wrong value verifies.
func clientGet(mem []byte, clk *fakeClock, grace time.Duration, key []byte, buf []byte) (value []byte, version uint64, res readResult, late bool) {
	start := clk.ns.Load()
	var raw [HeaderSize + 2*BucketSize]byte
	snapshot(raw[:HeaderSize], mem, 0)
	h1, err := ParseHeader(raw[:HeaderSize])
	if err != nil {
		return nil, 0, readRetry, false
	}
	hash := Hash(key)
	b1, b2 := Buckets(hash, h1.Buckets)
	snapshot(raw[HeaderSize:HeaderSize+BucketSize], mem, h1.BucketOffset(b1))
	snapshot(raw[HeaderSize+BucketSize:], mem, h1.BucketOffset(b2))

	res = readMiss
	var out [SlotsPerBucket]Slot
scan:
	for b := range 2 {
		bucket := raw[HeaderSize+b*BucketSize:]
		for _, s := range out[:ScanBucket(bucket, Fingerprint(hash), &out)] {
			if !h1.InArea(s) {
				return nil, 0, readRetry, false
			}
			rec := buf[:s.Len]
			copy(rec, mem[s.Offset:s.Offset+s.Len])
			v, ver, err := verRec(rec, key, s)
			switch {
			case err == nil:
				value, version, res = v, ver, readHit
				break scan
			case errors.Is(err, ErrKeyMismatch):
			default:
				return nil, 0, readRetry, false
			}
		}
	}
	var again [HeaderSize]byte
	snapshot(again[:], mem, 0)
	if h2, err := ParseHeader(again[:]); err != nil || h2.LeaseExpiry != h1.LeaseExpiry || h2.Generation != h1.Generation {
		return nil, 0, readRetry, false
	}
	late = time.Duration(clk.ns.Load()-start) >= grace/2
	return value, version, res, late
}

// cachedGet is a GET through a cached slot word w, as docs/layout.md
// "Reading" describes it: the header and the record alone. Anything but a
// verified record is a retry (the client would then read uncached).
func cachedGet(mem []byte, clk *fakeClock, grace time.Duration, key []byte, w uint64, buf []byte) (value []byte, version uint64, res readResult, late bool) {
	start := clk.ns.Load()
	var hdr [HeaderSize]byte
	snapshot(hdr[:], mem, 0)
	h, err := ParseHeader(hdr[:])
	s := DecodeSlot(w)
	if err != nil || !h.InArea(s) {
		return nil, 0, readRetry, false
	}
	rec := buf[:s.Len]
	copy(rec, mem[s.Offset:s.Offset+s.Len])
	value, version, err = verRec(rec, key, s)
	if err != nil {
		return nil, 0, readRetry, false
	}
	return value, version, readHit, time.Duration(clk.ns.Load()-start) >= grace/2
}

// slotWordOf returns a slot word that named key's record at some moment
// (0 if none was found): what a client caches after a hit.
func slotWordOf(mem, key []byte, buf []byte) uint64 {
	var hdr [HeaderSize]byte
	snapshot(hdr[:], mem, 0)
	h, err := ParseHeader(hdr[:])
	if err != nil {
		return 0
	}
	hash := Hash(key)
	b1, b2 := Buckets(hash, h.Buckets)
	var raw [BucketSize]byte
	var out [SlotsPerBucket]Slot
	for _, b := range [2]uint32{b1, b2} {
		snapshot(raw[:], mem, h.BucketOffset(b))
		for _, s := range out[:ScanBucket(raw[:], Fingerprint(hash), &out)] {
			if !h.InArea(s) {
				continue
			}
			rec := buf[:s.Len]
			copy(rec, mem[s.Offset:s.Offset+s.Len])
			if _, _, err := verRec(rec, key, s); err == nil {
				return s.Word()
			}
		}
	}
	return 0
}

// TestConcurrentReadersNeverAcceptWrongValue churns values of changing sizes
// (with deletes, compactions and Resets) through a small region so that blocks are
// reused many times, while readers GET concurrently. No value a reader
// verifies may differ from the one the writer wrote for that key at that
// version, even when the GET was too slow to be accepted; and among GETs
// fast enough to accept, a reader never sees a key's version go backwards.
// Half the GETs go through a location the reader cached (header and record
// alone, no bucket), which relies on the writer never leaving a record
// live while no slot names it.
// With a grace period of 1 writer op, blocks are reused under the readers'
// feet, so torn and reused records are common. Run with -race.
func TestConcurrentReadersNeverAcceptWrongValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		grace time.Duration // of the writer's clock, which moves 1ms per op
	}{
		{"within grace", 200 * time.Millisecond},
		{"reuse under readers", time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { churn(t, tc.grace) })
	}
	// With arenas: layout 3's reader, small values (concurrent_inline_test.go).
	t.Run("inline, reuse under readers", inlineChurn)
}

func churn(t *testing.T, grace time.Duration) {
	const (
		minOps     = 20000
		maxOps     = 40 * minOps
		minHits    = 2000
		readers    = 2
		nkeys      = 200
		resetEvery = 7001
	)
	tab, mem, clk := newTable(t, 2<<20, Config{Buckets: 1024, Grace: grace})
	keys := make([][]byte, nkeys)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key-%d", i))
	}

	var done atomic.Bool
	var hits atomic.Int64
	var wg sync.WaitGroup
	stats := make([][4]int, readers) // hit, miss, retry, late
	for id := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(id), 99))
			last := make([]uint64, nkeys)
			cache := make([]uint64, nkeys)
			buf := make([]byte, MaxRecord)
			for !done.Load() {
				i := r.IntN(nkeys)
				var value []byte
				var version uint64
				res, late := readRetry, false
				if cache[i] != 0 && r.IntN(2) == 0 {
					value, version, res, late = cachedGet(mem, clk, grace, keys[i], cache[i], buf)
				}
				if res != readHit {
					value, version, res, late = clientGet(mem, clk, grace, keys[i], buf)
					if res == readHit {
						value = append([]byte(nil), value...) // buf is reused next
						cache[i] = slotWordOf(mem, keys[i], buf)
					}
				}
				if res == readHit && !bytes.Equal(value, expectedValue(string(keys[i]), version)) {
					t.Errorf("reader %d verified a wrong value for %s at version %d (late %v)", id, keys[i], version, late)
					return
				}
				if late {
					stats[id][3]++
					continue
				}
				stats[id][res]++
				if res != readHit {
					continue
				}
				if version < last[i] {
					t.Errorf("reader %d saw %s go back from version %d to %d", id, keys[i], last[i], version)
					return
				}
				last[i] = version
				hits.Add(1)
			}
		}()
	}

	r := rand.New(rand.NewPCG(11, 12))
	model := map[string]uint64{}
	var noSpace int
	v := uint64(0)
	for v < minOps || hits.Load() < minHits && v < maxOps {
		v++
		clk.Advance(time.Millisecond)
		k := keys[r.IntN(nkeys)]
		switch {
		case v%resetEvery == 0:
			tab.Reset()
			clear(model)
		case v%97 == 0: // records move under the readers
			tab.Compact(64 << 10)
		case r.IntN(10) == 0:
			if _, err := tab.Delete(k); err != nil {
				t.Fatal(err)
			}
			delete(model, string(k))
		default:
			err := tab.Put(k, expectedValue(string(k), v), mv(v))
			if errors.Is(err, ErrNoSpace) {
				noSpace++
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			model[string(k)] = v
		}
		revealWhenDue(t, tab) // a Reset's hiding phase ends as soon as RevealIn allows
	}
	done.Store(true)
	wg.Wait()

	t.Logf("writer: %d ops, %d no-space; readers (hit, miss, retry, late): %v", v, noSpace, stats)
	if hits.Load() == 0 {
		t.Fatal("no reader accepted a value while the writer ran")
	}
	if st := tab.Stats(); v*1500 < 4*st.BytesArea {
		t.Errorf("only ~%d bytes written through a %d-byte area: blocks were not reused", v*1500, st.BytesArea)
	}
	clk.Advance(grace) // nothing is racing now; let no read count as late
	revealWhenDue(t, tab)
	for _, k := range keys {
		value, version, res, _ := clientGet(mem, clk, grace, k, make([]byte, MaxRecord))
		want, ok := model[string(k)]
		switch {
		case ok && (res != readHit || version != want || !bytes.Equal(value, expectedValue(string(k), want))):
			t.Errorf("%s: final read %v version %d, want version %d", k, res, version, want)
		case !ok && res != readMiss:
			t.Errorf("%s: final read %v, want a miss", k, res)
		}
	}
}
