package table

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestClasses(t *testing.T) {
	t.Parallel()
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
	for n := uint64(minBlock); n <= MaxRecord; n += RecordAlign {
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

func TestListOf(t *testing.T) {
	t.Parallel()
	for n := uint64(minBlock); n < 1<<24; n += RecordAlign + n/64&^7 {
		c := listOf(n)
		if classSize(c) > n || c < numClasses-1 && classSize(c+1) <= n {
			t.Fatalf("listOf(%d) = %d: sizes [%d, %d)", n, c, classSize(c), classSize(c+1))
		}
	}
	if listOf(MaxArea) != numClasses-1 {
		t.Fatalf("listOf(MaxArea) = %d", listOf(MaxArea))
	}
}

// extents lists the allocator's free extents by offset.
func extents(a *allocator) [][2]uint64 {
	var out [][2]uint64
	for _, e := range a.ext {
		if e.n != 0 {
			out = append(out, [2]uint64{e.off, e.n})
		}
	}
	slices.SortFunc(out, func(x, y [2]uint64) int { return cmp.Compare(x[0], y[0]) })
	return out
}

// TestReleaseCoalesces frees the blocks of a full area in random orders:
// free space is always kept as maximal extents, and once everything is
// free it is one extent again.
func TestReleaseCoalesces(t *testing.T) {
	t.Parallel()
	const base, end = 4096, 4096 + 1<<16
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		a := newAllocator(base, end)
		var blocks [][2]uint64
		for {
			n := uint64(minBlock) + uint64(r.IntN(600))&^7
			off, ok := a.alloc(n)
			if !ok {
				if n == minBlock {
					break
				}
				continue
			}
			blocks = append(blocks, [2]uint64{off, n})
		}
		if a.free >= minBlock {
			t.Fatalf("round %d: area not full, %d bytes free", round, a.free)
		}
		r.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
		for i, b := range blocks {
			a.used -= b[1]
			a.release(b[0], b[1])
			ex := extents(&a)
			for k := 1; k < len(ex); k++ {
				if ex[k-1][0]+ex[k-1][1] >= ex[k][0] {
					t.Fatalf("round %d, release %d: extents %v and %v touch or overlap", round, i, ex[k-1], ex[k])
				}
			}
		}
		if ex := extents(&a); len(ex) != 1 || ex[0] != [2]uint64{base, end - base} || a.free != end-base {
			t.Fatalf("round %d: all free, yet extents %v", round, ex)
		}
		if off, ok := a.alloc(end - base); !ok || off != base {
			t.Fatalf("round %d: the whole area is free but not allocatable", round)
		}
	}
}

// usedAllocator is an allocator whose whole area is in use.
func usedAllocator(base, end uint64) allocator {
	a := newAllocator(base, end)
	if _, ok := a.alloc(end - base); !ok {
		panic("cannot allocate a fresh area")
	}
	return a
}

// TestAllocFailsOnlyWithoutFit: with free extents of every kind of size on
// the lists, an allocation fails exactly when no extent is large enough,
// and takes the front of one that is.
func TestAllocFailsOnlyWithoutFit(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 9))
	for round := range 300 {
		const base = 1 << 12
		// Carve the area into alternating used blocks and free holes.
		a := usedAllocator(base, base+1<<22)
		var holes []uint64
		off := uint64(base)
		for range 1 + r.IntN(40) {
			off += minBlock // a used block between holes
			n := uint64(8+r.IntN(3000))&^7 + 8
			if off+n > base+1<<22 {
				break
			}
			a.used -= n
			a.release(off, n)
			holes = append(holes, n)
			off += n
		}
		largest := slices.Max(holes)
		if got := a.largest(); got != largest {
			t.Fatalf("round %d: largest() = %d, want %d", round, got, largest)
		}
		for _, n := range []uint64{minBlock, largest &^ 7, largest + 8, uint64(minBlock+r.IntN(3000)) &^ 7} {
			if n < minBlock {
				continue
			}
			want := n <= largest
			before := a.free
			off, ok := a.alloc(n)
			if ok != want {
				t.Fatalf("round %d: alloc(%d) = %v with holes %v", round, n, ok, holes)
			}
			if ok {
				if a.free != before-n || a.used != 1<<22-before+n {
					t.Fatalf("round %d: alloc(%d) accounting: free %d used %d", round, n, a.free, a.used)
				}
				a.used -= n
				a.release(off, n)
			}
			if a.free != before {
				t.Fatalf("round %d: free %d after alloc and release, was %d", round, a.free, before)
			}
		}
	}
}

// TestAllocatorNeverOverlaps churns blocks through alloc/retire/reclaim and
// checks that live and limbo blocks never overlap and that the byte counts
// add up.
func TestAllocatorNeverOverlaps(t *testing.T) {
	t.Parallel()
	const base, end = 4096, 1 << 20
	a := newAllocator(base, end)
	r := rand.New(rand.NewPCG(3, 4))
	owner := make([]int32, end/RecordAlign) // block id covering each 8 bytes, 0 if none
	type block struct{ off, n uint64 }
	live := map[int32]block{}
	limbo := map[int32]block{}
	var id int32
	mark := func(b block, v, want int32) {
		for i := b.off / 8; i < (b.off+b.n)/8; i++ {
			if owner[i] != want {
				t.Fatalf("block %+v at %d: owner %d, want %d", b, i*8, owner[i], want)
			}
			owner[i] = v
		}
	}
	now := int64(0)
	const grace = 50
	var fails int
	for step := 0; step < churnOps(200000); step++ {
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
			n := uint64(minBlock) + uint64(r.ExpFloat64()*2000)&^7
			if r.IntN(100) == 0 {
				n = uint64(minBlock) + uint64(r.IntN(MaxRecord-minBlock))&^7
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
			used += b.n
		}
		for _, b := range limbo {
			lim += b.n
		}
		if used != a.used || lim != a.inLimbo || a.used+a.inLimbo+a.free != end-base {
			t.Fatalf("step %d: used %d/%d limbo %d/%d free %d, area %d", step, a.used, used, a.inLimbo, lim, a.free, end-base)
		}
	}
	if fails == 0 {
		t.Fatal("no allocation failed: the test never put the area under pressure")
	}
	t.Logf("%d allocations failed under pressure", fails)
}
