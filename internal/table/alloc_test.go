package table

import (
	"math/rand/v2"
	"testing"
)

func TestClasses(t *testing.T) {
	if got := classOf(MaxRecord); got != numClasses-1 {
		t.Fatalf("classOf(MaxRecord) = %d, want numClasses-1 = %d", got, numClasses-1)
	}
	for c := range numClasses {
		if s := classSize(c); s%RecordAlign != 0 || classOf(s) != c {
			t.Fatalf("class %d: size %d, classOf(size) = %d", c, s, classOf(s))
		}
		if c > 0 && classSize(c) <= classSize(c-1) {
			t.Fatalf("class sizes not increasing at %d", c)
		}
	}
	for n := uint64(MinRecord); n <= MaxRecord; n += RecordAlign {
		c := classOf(n)
		size := classSize(c)
		if size < n || c > 0 && classSize(c-1) >= n {
			t.Fatalf("classOf(%d) = %d (size %d): not the smallest class that fits", n, c, size)
		}
		if 4*(size-n) >= n { // the documented bound: a block is < 25% larger
			t.Fatalf("record %d in a %d block wastes %d", n, size, size-n)
		}
	}
}

func TestReleaseCutsWholeBlocks(t *testing.T) {
	for n := uint64(MinRecord); n < 1<<16; n += RecordAlign {
		a := newAllocator(0, 1<<20)
		a.release(0, n)
		var sum uint64
		for c, l := range a.free {
			sum += uint64(len(l)) * classSize(c)
		}
		if sum != n || a.freeListed != n {
			t.Fatalf("release(%d) listed %d (counted %d)", n, sum, a.freeListed)
		}
	}
}

// TestAllocatorNeverOverlaps churns blocks through alloc/retire/reclaim and
// checks that live and limbo blocks never overlap and that the byte counts
// add up.
func TestAllocatorNeverOverlaps(t *testing.T) {
	const base, end = 4096, 1 << 20
	a := newAllocator(base, end)
	r := rand.New(rand.NewPCG(3, 4))
	owner := make([]int32, end/RecordAlign) // block id covering each 8 bytes, 0 if none
	type block struct{ off, n uint64 }
	live := map[int32]block{}
	limbo := map[int32]block{}
	var id int32
	mark := func(b block, v, want int32) {
		for i := b.off / 8; i < (b.off+classSize(classOf(b.n)))/8; i++ {
			if owner[i] != want {
				t.Fatalf("block %+v at %d: owner %d, want %d", b, i*8, owner[i], want)
			}
			owner[i] = v
		}
	}
	now := int64(0)
	const grace = 50
	var fails int
	for step := 0; step < 200000; step++ {
		now++
		a.reclaim(now - grace)
		// What reclaim freed is no longer owned; what is still in limbo is.
		inLimbo := map[uint64]bool{}
		for _, e := range a.limbo[a.limboHead:] {
			inLimbo[e.off] = true
		}
		for k, b := range limbo {
			if !inLimbo[b.off] {
				mark(b, 0, k)
				delete(limbo, k)
			}
		}
		if r.IntN(2) == 0 || len(live) == 0 {
			n := uint64(MinRecord) + uint64(r.ExpFloat64()*2000)&^7
			if r.IntN(100) == 0 {
				n = uint64(MinRecord) + uint64(r.IntN(MaxRecord-MinRecord))&^7
			}
			off, ok := a.alloc(n)
			if !ok {
				fails++
				continue
			}
			if off < base || off+n > end || off%RecordAlign != 0 {
				t.Fatalf("alloc(%d) = %d outside the area", n, off)
			}
			id++
			live[id] = block{off, n}
			mark(live[id], id, 0)
		} else {
			for k, b := range live {
				a.retire(b.off, b.n, now)
				delete(live, k)
				limbo[k] = b
				break
			}
		}
		var used, lim uint64
		for _, b := range live {
			used += classSize(classOf(b.n))
		}
		for _, b := range limbo {
			lim += classSize(classOf(b.n))
		}
		if used != a.used || lim != a.inLimbo || a.used+a.inLimbo+a.freeBytes() != end-base {
			t.Fatalf("step %d: used %d/%d limbo %d/%d free %d, area %d", step, a.used, used, a.inLimbo, lim, a.freeBytes(), end-base)
		}
	}
	if fails == 0 {
		t.Fatal("no allocation failed: the test never put the area under pressure")
	}
	t.Logf("%d allocations failed under pressure", fails)
}
