package table

import "math/bits"

// The record area is carved by a coalescing allocator. A record gets a
// block of exactly its own padded length (so a block's size is always the
// length in the slot that names it, and nothing about blocks is stored in
// the region). Free space is kept as maximal extents: a block that becomes
// free merges at once with a free extent that ends where it starts and one
// that starts where it ends, so free bytes never stay split into pieces too
// small for the records being written merely because of the order in which
// they were freed. Extents of minBlock bytes or more sit on segregated
// lists by size (the size classes below); extents smaller than any record
// (8 to 24 bytes, the rest of a block split to within less than a record)
// are on no list and wait for a neighbour to merge with.
//
// An allocation takes the front of a free extent: one that fits from the
// first few entries of the list whose sizes straddle the request, else the
// head of the smallest list whose every extent fits, else, as a last resort,
// any that fits from the straddling list. So an allocation fails only if no
// free extent is large enough ("no block"), and a fresh area, or one whose
// every block is free, is filled front to back without gaps.
//
// Superseded records wait in limbo, a FIFO stamped with the writer's clock,
// until the grace period has passed; only then are their blocks freed (and
// merged). Blocks set aside by reservations (reserve.go) are neither used
// nor free until a Put fills them or the reservation is released; a
// released block was never published, so it is freed at once.
//
// Everything here lives in Go memory and, once the maps and slices have
// grown to the table's working size, allocates nothing per operation.

// minBlock is the smallest extent the allocator lists: layouts 2 and 3's
// shortest record. Layout 4's records are longer (MinRecord); the classes
// keep this base so that their sizes stay multiples of 8.
const minBlock = 32

// numClasses covers [minBlock, MaxRecord]: classOf(MaxRecord) == numClasses-1.
// Class sizes are spaced a quarter of a power of two apart from minBlock
// (32, 40, 48, 56, 64, 80, 96, 112, 128, 160, ...); free extents of class c
// are those of size [classSize(c), classSize(c+1)), and the last class
// takes every larger extent too.
const numClasses = 62

// classOf is the smallest class whose size is at least n.
func classOf(n uint64) int {
	if n <= minBlock {
		return 0
	}
	k := bits.Len64(n-1) - 1 // 1<<k < n <= 1<<(k+1), k >= 5
	sub := (n - 1<<k + 1<<(k-2) - 1) >> (k - 2)
	return (k-5)*4 + int(sub)
}

// classSize is the size of class c.
func classSize(c int) uint64 {
	p := uint64(minBlock) << (c / 4)
	return p + uint64(c%4)*(p/4)
}

// listOf is the list a free extent of n >= minBlock bytes belongs on.
func listOf(n uint64) int {
	c := classOf(n)
	if classSize(c) > n {
		c--
	}
	return min(c, numClasses-1)
}

type limboEntry struct {
	off, n uint64
	at     int64 // writer clock, ns
}

// extent is a maximal run of free bytes. An unused entry has n == 0.
type extent struct {
	off, n     uint64
	prev, next int32 // neighbours on its list, -1 at the ends
	list       int8  // -1: smaller than a record, on no list
}

// scanFirst bounds the quick look at the straddling list before a larger
// list is used.
const scanFirst = 8

type allocator struct {
	base, end uint64

	ext     []extent
	spare   []int32          // indices of unused ext entries
	byStart map[uint64]int32 // off/8 of each free extent
	byEnd   map[uint64]int32 // (off+n)/8 of each free extent
	head    [numClasses]int32
	lists   uint64 // bit c set: list c is not empty

	limbo     []limboEntry // FIFO from limboHead
	limboHead int

	// Bytes by state; used+reserved+inLimbo+free == end-base.
	used, reserved, inLimbo, free uint64
}

func newAllocator(base, end uint64) allocator {
	a := allocator{base: base, end: end, byStart: map[uint64]int32{}, byEnd: map[uint64]int32{}}
	for c := range a.head {
		a.head[c] = -1
	}
	a.release(base, end-base)
	return a
}

// alloc takes a block of n bytes (a multiple of 8, >= minBlock) for a
// record, or reports false with nothing changed.
func (a *allocator) alloc(n uint64) (uint64, bool) {
	off, ok := a.take(n)
	if ok {
		a.used += n
	}
	return off, ok
}

// allocReserved is alloc for a block that a reservation sets aside.
func (a *allocator) allocReserved(n uint64) (uint64, bool) {
	off, ok := a.take(n)
	if ok {
		a.reserved += n
	}
	return off, ok
}

// fill turns a reserved block into a used one (a Put wrote its record).
func (a *allocator) fill(n uint64) {
	a.reserved -= n
	a.used += n
}

// unreserve frees a reserved block that never held a published record.
func (a *allocator) unreserve(off, n uint64) {
	a.reserved -= n
	a.release(off, n)
}

// unalloc frees a block alloc gave that was never published.
func (a *allocator) unalloc(off, n uint64) {
	a.used -= n
	a.release(off, n)
}

// fits reports whether alloc(n) would succeed.
func (a *allocator) fits(n uint64) bool { return a.find(n) >= 0 }

func (a *allocator) take(n uint64) (uint64, bool) {
	i := a.find(n)
	if i < 0 {
		return 0, false
	}
	e := &a.ext[i]
	off := e.off
	a.free -= n
	if e.n == n {
		a.remove(i)
		return off, true
	}
	// Keep the rest of the extent where it is: same end, new start.
	delete(a.byStart, off/RecordAlign)
	a.byStart[(off+n)/RecordAlign] = i
	a.resize(i, off+n, e.n-n)
	return off, true
}

// find returns a free extent of at least n bytes, or -1.
func (a *allocator) find(n uint64) int32 {
	c := classOf(n)
	if c >= numClasses-1 { // the last list holds extents of any larger size
		return a.scan(numClasses-1, n, -1)
	}
	straddle := classSize(c) != n && c > 0 // list c-1 holds some extents >= n
	if straddle {
		if i := a.scan(c-1, n, scanFirst); i >= 0 {
			return i
		}
	}
	if m := a.lists >> c << c; m != 0 {
		return a.head[bits.TrailingZeros64(m)]
	}
	if straddle {
		return a.scan(c-1, n, -1)
	}
	return -1
}

// scan returns the first extent of at least n bytes among the first limit
// entries of list c (all of them if limit < 0), or -1.
func (a *allocator) scan(c int, n uint64, limit int) int32 {
	for i := a.head[c]; i >= 0 && limit != 0; i = a.ext[i].next {
		if a.ext[i].n >= n {
			return i
		}
		limit--
	}
	return -1
}

// retire puts the block of a superseded record of n bytes into limbo.
func (a *allocator) retire(off, n uint64, now int64) {
	a.used -= n
	a.inLimbo += n
	if a.limboHead > 0 && a.limboHead >= len(a.limbo)/2 && len(a.limbo) == cap(a.limbo) {
		k := copy(a.limbo, a.limbo[a.limboHead:])
		a.limbo = a.limbo[:k]
		a.limboHead = 0
	}
	a.limbo = append(a.limbo, limboEntry{off: off, n: n, at: now})
}

// reclaim frees every limbo block stamped at or before cutoff. Stamps are
// taken in order, so it stops at the first younger one; a clock that went
// backwards only delays reuse.
func (a *allocator) reclaim(cutoff int64) {
	for a.limboHead < len(a.limbo) && a.limbo[a.limboHead].at <= cutoff {
		e := a.limbo[a.limboHead]
		a.limboHead++
		a.inLimbo -= e.n
		a.release(e.off, e.n)
	}
	if a.limboHead == len(a.limbo) {
		a.limbo, a.limboHead = a.limbo[:0], 0
	}
}

// lastRetired is the stamp of the youngest block in limbo, if any.
func (a *allocator) lastRetired() (int64, bool) {
	if a.limboHead == len(a.limbo) {
		return 0, false
	}
	return a.limbo[len(a.limbo)-1].at, true
}

// release frees n bytes at off, merging them with the free extents on
// either side.
func (a *allocator) release(off, n uint64) {
	a.free += n
	end := off + n
	l, left := a.byEnd[off/RecordAlign]
	r, right := a.byStart[end/RecordAlign]
	switch {
	case left && right: // l grows over the block and r
		rend := a.ext[r].off + a.ext[r].n
		a.remove(r)
		delete(a.byEnd, off/RecordAlign)
		a.byEnd[rend/RecordAlign] = l
		a.resize(l, a.ext[l].off, rend-a.ext[l].off)
	case left: // l grows over the block
		delete(a.byEnd, off/RecordAlign)
		a.byEnd[end/RecordAlign] = l
		a.resize(l, a.ext[l].off, end-a.ext[l].off)
	case right: // r grows back over the block
		delete(a.byStart, end/RecordAlign)
		a.byStart[off/RecordAlign] = r
		a.resize(r, off, a.ext[r].off+a.ext[r].n-off)
	default:
		a.add(off, n)
	}
}

// resize gives extent i new bounds (its indexes are the caller's) and
// moves it to the list of its new size, if that changed.
func (a *allocator) resize(i int32, off, n uint64) {
	e := &a.ext[i]
	same := e.n >= minBlock && n >= minBlock && listOf(e.n) == listOf(n)
	if !same {
		a.unlink(i)
	}
	e.off, e.n = off, n
	if !same {
		a.link(i)
	}
}

func (a *allocator) add(off, n uint64) {
	var i int32
	if k := len(a.spare); k > 0 {
		i = a.spare[k-1]
		a.spare = a.spare[:k-1]
	} else {
		i = int32(len(a.ext))
		a.ext = append(a.ext, extent{})
	}
	a.ext[i] = extent{off: off, n: n, prev: -1, next: -1, list: -1}
	a.byStart[off/RecordAlign] = i
	a.byEnd[(off+n)/RecordAlign] = i
	a.link(i)
}

func (a *allocator) remove(i int32) {
	e := &a.ext[i]
	a.unlink(i)
	delete(a.byStart, e.off/RecordAlign)
	delete(a.byEnd, (e.off+e.n)/RecordAlign)
	*e = extent{}
	a.spare = append(a.spare, i)
}

// link puts extent i at the head of its list (if it is large enough for one).
func (a *allocator) link(i int32) {
	e := &a.ext[i]
	if e.n < minBlock {
		e.list = -1
		return
	}
	c := listOf(e.n)
	e.list, e.prev, e.next = int8(c), -1, a.head[c]
	if e.next >= 0 {
		a.ext[e.next].prev = i
	}
	a.head[c] = i
	a.lists |= 1 << c
}

func (a *allocator) unlink(i int32) {
	e := &a.ext[i]
	if e.list < 0 {
		return
	}
	c := int(e.list)
	if e.prev >= 0 {
		a.ext[e.prev].next = e.next
	} else {
		a.head[c] = e.next
	}
	if e.next >= 0 {
		a.ext[e.next].prev = e.prev
	}
	if a.head[c] < 0 {
		a.lists &^= 1 << c
	}
	e.prev, e.next, e.list = -1, -1, -1
}

// largest is the size of the largest free extent: the largest record that
// can be written now is this long.
func (a *allocator) largest() uint64 {
	if a.lists == 0 {
		var m uint64
		for _, i := range a.byStart { // only extents too small for a record
			m = max(m, a.ext[i].n)
		}
		return m
	}
	c := 63 - bits.LeadingZeros64(a.lists)
	var m uint64
	for i := a.head[c]; i >= 0; i = a.ext[i].next {
		m = max(m, a.ext[i].n)
	}
	return m
}

// hold takes every free byte in [lo, hi) out of the free extents, as
// reserved bytes, and appends the pieces to out (compaction keeps new
// blocks out of the stretch it empties). unhold gives them back.
func (a *allocator) hold(lo, hi uint64, out [][2]uint64) [][2]uint64 {
	start := len(out)
	for _, e := range a.ext { // the extents that overlap, found first: hold changes a.ext
		if e.n != 0 && e.off < hi && e.off+e.n > lo {
			out = append(out, [2]uint64{e.off, e.n})
		}
	}
	for k := start; k < len(out); k++ {
		off, n := out[k][0], out[k][1]
		a.remove(a.byStart[off/RecordAlign])
		if off < lo {
			a.add(off, lo-off)
		}
		if off+n > hi {
			a.add(hi, off+n-hi)
		}
		in0, in1 := max(off, lo), min(off+n, hi)
		a.free -= in1 - in0
		a.reserved += in1 - in0
		out[k] = [2]uint64{in0, in1 - in0}
	}
	return out
}

func (a *allocator) unhold(pieces [][2]uint64) {
	for _, p := range pieces {
		a.unreserve(p[0], p[1])
	}
}
