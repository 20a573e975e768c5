package table

import "math/bits"

// The record area is carved by a size-class allocator. Classes are spaced a
// quarter of a power of two apart from MinRecord (32, 40, 48, 56, 64, 80, 96,
// 112, 128, 160, ...) up to the first class that holds MaxRecord, so a block
// is less than 25% larger than the record in it (internal waste < 20% of the
// block, on top of a record's own 0-7 bytes of padding).
//
// A block's class is never stored: it is recomputed from the record length
// in the slot, so every block handed out is exactly its class's size. Free
// blocks sit on per-class free lists (in Go memory, so freed bytes are not
// touched until reused); new space comes from a bump pointer. When a class's
// list and the bump pointer are both exhausted, the smallest larger free
// block that splits cleanly is split: the front serves the request and the
// rest is cut into class-sized blocks for the free lists. There is no
// coalescing, so space freed as small blocks cannot serve large records
// until the table is empty: external waste is free space stranded in classes
// too small for the records being written (Stats.Free counts it). When no
// record is live and limbo has drained, the allocator starts over from one
// empty bump area.
//
// Superseded records wait in limbo, a FIFO stamped with the writer's clock,
// until the grace period has passed; only then do their blocks reach the
// free lists.

// numClasses covers [MinRecord, MaxRecord]: classOf(MaxRecord) == numClasses-1.
const numClasses = 62

// classOf is the smallest class whose blocks hold n bytes.
func classOf(n uint64) int {
	if n <= MinRecord {
		return 0
	}
	k := bits.Len64(n-1) - 1 // 1<<k < n <= 1<<(k+1), k >= 5
	sub := (n - 1<<k + 1<<(k-2) - 1) >> (k - 2)
	return (k-5)*4 + int(sub)
}

// classSize is the size of class c's blocks.
func classSize(c int) uint64 {
	p := uint64(MinRecord) << (c / 4)
	return p + uint64(c%4)*(p/4)
}

type limboEntry struct {
	off   uint64
	class int
	at    int64 // writer clock, ns
}

type allocator struct {
	base, end, bump uint64
	free            [numClasses][]uint32 // block offset/8, LIFO
	limbo           []limboEntry         // FIFO from limboHead
	limboHead       int

	used, freeListed, inLimbo uint64 // bytes, by block state
}

func newAllocator(base, end uint64) allocator {
	return allocator{base: base, end: end, bump: base}
}

// alloc returns the offset of a block for a record of n bytes, or false if
// no block is available; on false nothing changed.
func (a *allocator) alloc(n uint64) (uint64, bool) {
	c := classOf(n)
	src, ok := a.source(c)
	if !ok {
		return 0, false
	}
	size := classSize(c)
	var off uint64
	switch {
	case src == fromBump:
		off = a.bump
		a.bump += size
	case src == c:
		off, _ = a.pop(c)
	default:
		off, _ = a.pop(src)
		a.release(off+size, classSize(src)-size)
	}
	a.used += size
	return off, true
}

// fits reports whether alloc(n) would succeed.
func (a *allocator) fits(n uint64) bool {
	_, ok := a.source(classOf(n))
	return ok
}

const fromBump = -1

// source picks where a class-c block comes from, in order of preference:
// c's free list (c), the bump pointer (fromBump), or the free list of the
// smallest larger class whose blocks split cleanly (that class).
func (a *allocator) source(c int) (int, bool) {
	if len(a.free[c]) > 0 {
		return c, true
	}
	size := classSize(c)
	if a.end-a.bump >= size {
		return fromBump, true
	}
	for big := c + 1; big < numClasses; big++ {
		if classSize(big)-size >= MinRecord && len(a.free[big]) > 0 {
			return big, true
		}
	}
	return 0, false
}

// retire puts the block holding a superseded record of n bytes into limbo.
func (a *allocator) retire(off, n uint64, now int64) {
	c := classOf(n)
	size := classSize(c)
	a.used -= size
	a.inLimbo += size
	if a.limboHead > 0 && a.limboHead >= len(a.limbo)/2 && len(a.limbo) == cap(a.limbo) {
		k := copy(a.limbo, a.limbo[a.limboHead:])
		a.limbo = a.limbo[:k]
		a.limboHead = 0
	}
	a.limbo = append(a.limbo, limboEntry{off: off, class: c, at: now})
}

// reclaim frees every limbo block stamped at or before cutoff. Stamps are
// taken in order, so it stops at the first younger one; a clock that went
// backwards only delays reuse.
func (a *allocator) reclaim(cutoff int64) {
	for a.limboHead < len(a.limbo) && a.limbo[a.limboHead].at <= cutoff {
		e := a.limbo[a.limboHead]
		a.limboHead++
		size := classSize(e.class)
		a.inLimbo -= size
		a.push(e.class, e.off)
	}
	if a.limboHead == len(a.limbo) {
		a.limbo, a.limboHead = a.limbo[:0], 0
		if a.used == 0 {
			a.restart()
		}
	}
}

// restart forgets every free block and limbo entry and starts from an empty
// bump area. Only safe when no record is live or in limbo.
func (a *allocator) restart() {
	for c := range a.free {
		a.free[c] = a.free[c][:0]
	}
	a.freeListed = 0
	a.bump = a.base
}

// release cuts n bytes at off (n a multiple of 8, 0 or >= MinRecord) into
// class-sized free blocks, largest first, never leaving a remainder too
// small to be a block.
func (a *allocator) release(off, n uint64) {
	for n > 0 {
		c := classOf(n)
		if classSize(c) > n {
			c--
		}
		for r := n - classSize(c); r != 0 && r < MinRecord; r = n - classSize(c) {
			c--
		}
		a.push(c, off)
		off += classSize(c)
		n -= classSize(c)
	}
}

func (a *allocator) push(c int, off uint64) {
	a.free[c] = append(a.free[c], uint32(off/RecordAlign))
	a.freeListed += classSize(c)
}

func (a *allocator) pop(c int) (uint64, bool) {
	l := a.free[c]
	if len(l) == 0 {
		return 0, false
	}
	off := uint64(l[len(l)-1]) * RecordAlign
	a.free[c] = l[:len(l)-1]
	a.freeListed -= classSize(c)
	return off, true
}

// freeBytes is everything that is neither live nor in limbo.
func (a *allocator) freeBytes() uint64 {
	return a.freeListed + a.end - a.bump
}
