package table

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

const arenaGrace = 100e6 // Gi: 100 ms of the writer's clock, in ns

// newTestArenas is newArenas that fails the test on error.
func newTestArenas(t *testing.T, nbuckets uint32, arenaBytes uint64) *arenas {
	t.Helper()
	a, err := newArenas(nbuckets, arenaBytes, arenaGrace)
	if err != nil {
		t.Fatal(err)
	}
	return &a
}

// mustAlloc allocates and checks the offset first fit should give.
func mustAlloc(t *testing.T, a *arenas, b uint32, n, want uint64) {
	t.Helper()
	off, ok := a.alloc(b, n)
	if !ok || off != want {
		t.Fatalf("alloc(%d, %d) = %d, %v; want %d", b, n, off, ok, want)
	}
}

func mustCheck(t *testing.T, a *arenas, live []arenaBlock) {
	t.Helper()
	if err := a.check(live); err != nil {
		t.Fatal(err)
	}
}

func TestNewArenasBounds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		bytes uint64
		grace int64
		ok    bool
	}{
		{0, 1, true}, {8, 1, true}, {1440, 0, true}, {MaxArenaBytes, 1, true},
		{12, 1, false}, {MaxArenaBytes + 8, 1, false}, {64, -1, false},
	} {
		_, err := newArenas(4, c.bytes, c.grace)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrBadConfig) {
			t.Errorf("newArenas(4, %d, %d): %v", c.bytes, c.grace, err)
		}
	}
	// 180 units a bucket: buckets share bitmap words; 2^20 of them take
	// 180 bits each, no more.
	a := newTestArenas(t, 1<<20, 1440)
	if got, want := len(a.taken), (1<<20)*180/64; got != want {
		t.Fatalf("bitmap of %d words, want %d", got, want)
	}
}

// TestArenaFirstFit: blocks are taken front to back within their own
// bucket's arena, whose units share bitmap words with its neighbours', and
// never past its end.
func TestArenaFirstFit(t *testing.T) {
	t.Parallel()
	a := newTestArenas(t, 3, 1440) // 180 units: bucket 1 spans words 2-5
	mustAlloc(t, a, 1, 64, 0)
	mustAlloc(t, a, 1, 336, 64)
	mustAlloc(t, a, 0, 1440, 0) // a whole arena
	mustAlloc(t, a, 2, 32, 0)
	if a.fits(0, 8) {
		t.Fatal("bucket 0 is full but fits 8 more bytes")
	}
	mustAlloc(t, a, 1, 1440-400, 400) // the rest of bucket 1, to its last unit
	if _, ok := a.alloc(1, 8); ok {
		t.Fatal("allocated past bucket 1's arena")
	}
	if _, ok := a.alloc(2, 1440); ok {
		t.Fatal("allocated 1440 bytes in a bucket with 32 taken")
	}
	mustAlloc(t, a, 2, 1440-32, 32)
	mustCheck(t, a, []arenaBlock{{1, 0, 64}, {1, 64, 336}, {0, 0, 1440}, {2, 0, 32}, {1, 400, 1040}, {2, 32, 1408}})
	if a.live != 3*1440 || a.takenBytes(1) != 1440 {
		t.Fatalf("live %d, bucket 1 taken %d", a.live, a.takenBytes(1))
	}
	// A check that misses a block, or holds one twice, fails.
	if a.check([]arenaBlock{{1, 0, 64}}) == nil {
		t.Fatal("check passed with blocks unaccounted for")
	}
	if err := a.check([]arenaBlock{{1, 0, 64}, {1, 32, 64}}); err == nil || !strings.Contains(err.Error(), "overlaps") {
		t.Fatalf("overlapping blocks: %v", err)
	}
	if a.check([]arenaBlock{{1, 1400, 64}}) == nil {
		t.Fatal("check passed a block past its arena")
	}
}

// TestArenaLimboTiming: a freed block is reused only Gi after the clock
// reading free was given, in stamp order; freeNow skips limbo.
func TestArenaLimboTiming(t *testing.T) {
	t.Parallel()
	a := newTestArenas(t, 2, 128)
	mustAlloc(t, a, 0, 64, 0)
	mustAlloc(t, a, 0, 64, 64)
	now := int64(5e9)
	a.free(0, 0, 64, now)
	a.reclaim(now + arenaGrace - 1)
	if a.fits(0, 8) || a.inLimbo != 64 || a.limboBytes(0) != 64 {
		t.Fatalf("block reusable before Gi: limbo %d", a.inLimbo)
	}
	mustCheck(t, a, []arenaBlock{{0, 64, 64}})
	a.free(0, 64, 64, now+10)
	if at, ok := a.lastRetired(); !ok || at != now+10 {
		t.Fatalf("lastRetired %d, %v", at, ok)
	}
	a.reclaim(now + arenaGrace) // the first block's time, not the second's
	mustAlloc(t, a, 0, 64, 0)
	if a.fits(0, 8) {
		t.Fatal("the second block came out of limbo 10 ns early")
	}
	a.reclaim(now + arenaGrace + 10)
	mustAlloc(t, a, 0, 64, 64)
	if _, ok := a.lastRetired(); ok || a.inLimbo != 0 {
		t.Fatal("limbo not empty")
	}
	// freeNow: reusable at once.
	a.freeNow(0, 0, 64)
	mustAlloc(t, a, 0, 32, 0)
	mustCheck(t, a, []arenaBlock{{0, 0, 32}, {0, 64, 64}})
	// A clock that went backwards delays the younger stamp's block behind
	// the older one, never frees early.
	a.free(0, 0, 32, now+2*arenaGrace)
	a.free(0, 64, 64, now+arenaGrace) // stamped earlier, queued later
	a.reclaim(now + 2*arenaGrace)
	if a.takenBytes(0) != 96 {
		t.Fatalf("a block left limbo out of order: %d taken", a.takenBytes(0))
	}
	a.reclaim(now + 3*arenaGrace)
	if a.takenBytes(0) != 0 || a.live != 0 || a.inLimbo != 0 {
		t.Fatalf("taken %d, live %d, limbo %d", a.takenBytes(0), a.live, a.inLimbo)
	}
}

// TestArenaFragmentation: free bytes split into runs shorter than a request
// do not satisfy it; freeing the unit between two runs does.
func TestArenaFragmentation(t *testing.T) {
	t.Parallel()
	a := newTestArenas(t, 1, 320) // 40 units
	for i := range uint64(10) {
		mustAlloc(t, a, 0, 32, 32*i)
	}
	for i := uint64(0); i < 10; i += 2 {
		a.freeNow(0, 32*i, 32)
	}
	if free := 320 - a.takenBytes(0); free != 160 || a.fits(0, 40) {
		t.Fatalf("%d bytes free in runs of 32, yet fits(40) = %v", free, a.fits(0, 40))
	}
	mustAlloc(t, a, 0, 32, 0) // first fit: the first hole
	a.freeNow(0, 96, 32)      // joins holes [64, 96) and [128, 160)
	mustAlloc(t, a, 0, 96, 64)
	mustCheck(t, a, []arenaBlock{{0, 0, 32}, {0, 32, 32}, {0, 64, 96}, {0, 160, 32}, {0, 224, 32}, {0, 288, 32}})
}

// TestArenaModel runs random operations against a reference that keeps a
// unit map and a limbo list per bucket, comparing every allocation's
// offset (first fit) and checking the allocator after each step.
func TestArenaModel(t *testing.T) {
	t.Parallel()
	for _, arenaBytes := range []uint64{8, 72, 520, 1440, MaxArenaBytes} {
		r := rand.New(rand.NewPCG(arenaBytes, 1))
		const nb = 5
		a := newTestArenas(t, nb, arenaBytes)
		units := arenaBytes / 8
		ref := make([][]bool, nb) // unit taken
		for b := range ref {
			ref[b] = make([]bool, units)
		}
		type refLimbo struct {
			arenaBlock
			at int64
		}
		var live []arenaBlock
		var limbo []refLimbo
		now := int64(0)
		for step := range 3000 {
			b := uint32(r.IntN(nb))
			switch op := r.IntN(10); {
			case op < 5: // alloc
				n := 8 * (1 + r.Uint64N(min(units, 40)))
				want, ok := refFirstFit(ref[b], n/8)
				off, got := a.alloc(b, n)
				if got != ok || ok && off != want*8 {
					t.Fatalf("%d step %d: alloc(%d, %d) = %d, %v; reference %d, %v", arenaBytes, step, b, n, off, got, want*8, ok)
				}
				if ok {
					for u := want; u < want+n/8; u++ {
						ref[b][u] = true
					}
					live = append(live, arenaBlock{b, off, n})
				}
			case op < 8 && len(live) > 0: // free or freeNow
				i := r.IntN(len(live))
				blk := live[i]
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				if op == 7 {
					a.freeNow(blk.bucket, blk.off, blk.n)
					setUnits(ref[blk.bucket], blk, false)
				} else {
					a.free(blk.bucket, blk.off, blk.n, now)
					limbo = append(limbo, refLimbo{blk, now})
				}
			default: // time passes; reclaim
				now += r.Int64N(arenaGrace / 2)
				a.reclaim(now)
				for len(limbo) > 0 && limbo[0].at <= now-arenaGrace {
					setUnits(ref[limbo[0].bucket], limbo[0].arenaBlock, false)
					limbo = limbo[1:]
				}
			}
			mustCheck(t, a, live)
			for b := range uint32(nb) {
				var n uint64
				for _, x := range ref[b] {
					if x {
						n += 8
					}
				}
				if a.takenBytes(b) != n {
					t.Fatalf("step %d: bucket %d has %d bytes taken, reference %d", step, b, a.takenBytes(b), n)
				}
			}
		}
	}
}

func refFirstFit(units []bool, k uint64) (uint64, bool) {
	run := uint64(0)
	for i, x := range units {
		if x {
			run = 0
			continue
		}
		run++
		if run == k {
			return uint64(i) + 1 - k, true
		}
	}
	return 0, false
}

func setUnits(units []bool, blk arenaBlock, v bool) {
	for u := blk.off / 8; u < (blk.off+blk.n)/8; u++ {
		units[u] = v
	}
}

func BenchmarkArenaAllocFree(b *testing.B) {
	a, _ := newArenas(1<<10, 1440, 0)
	b.ReportAllocs()
	now := int64(0)
	i := uint32(0)
	for b.Loop() {
		bk := i % (1 << 10)
		off, ok := a.alloc(bk, 144)
		if !ok {
			b.Fatal("no room")
		}
		a.free(bk, off, 144, now)
		a.reclaim(now)
		i++
	}
}
