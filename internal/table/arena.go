package table

// The arena allocator carves the per-bucket arenas of layouts 3 and 4
// (docs/layout.md, "Inline records") into blocks for inline records.
// An inline record lies wholly inside the arena of the bucket whose slot
// names it, so each arena is allocated on its own: a bitmap of 8-byte units
// per bucket (set: the unit belongs to a live, reserved or limbo block),
// first fit. Arenas are small (10·a bytes, a few hundred units) and a bucket
// holds at most 8 live records, so a linear scan of a few words is cheap and
// no free lists are worth their memory: with 2^24 buckets, every byte per
// bucket costs 16 MiB. The bitmaps of all buckets are packed end to end into
// one []uint64, bucket b's units at bits [b·units, (b+1)·units), so no
// bucket pays for a partly used word.
//
// Nothing about blocks is stored here: a block's length is the length in
// the slot word that names it, and the caller hands it back on free, as
// with the record-area allocator (alloc.go).
//
// Rule R: arena bytes are reused only Gi after retirement (§5.4; a reader
// that accepts arena bytes gives up after Gi/2). free puts a block in limbo
// stamped with the writer's clock at the call, which the caller makes after
// the slot store that stopped naming it; reclaim frees the blocks stamped Gi
// or more before now. Gi is one value for the whole table, so entries
// become free in the order they were stamped, and limbo is a FIFO (as the
// record area's, alloc.go): reclaim stops at the first entry too young. A
// clock that went backwards only delays reuse. freeNow skips limbo, for a
// rebuild's moves (§5.7 step 5: nothing is live until Gi after the last such
// reuse, so no reader can accept the reused bytes).

import (
	"fmt"
	"math/bits"
)

// arenaBlock is a block of an arena: for check, what the caller holds.
type arenaBlock struct {
	bucket uint32
	off, n uint64 // within the bucket's arena, bytes
}

type arenas struct {
	nbuckets   uint32
	arenaBytes uint64
	units      uint64   // 8-byte units per arena
	taken      []uint64 // bit b·units+u: unit u of bucket b's arena is taken
	grace      int64    // Gi, ns of the writer's clock

	limbo limboFIFO // off: b·arenaBytes + offset in the arena

	// Bytes by state, over all arenas; live+inLimbo is every taken unit.
	// "live" counts blocks handed out and not freed: records, whatever
	// their state, and blocks the caller has yet to write.
	live, inLimbo uint64
}

// newArenas covers nbuckets arenas of arenaBytes each (a multiple of 8, at
// most MaxArenaBytes; 0: no arenas, nothing fits), whose blocks are reused
// grace ns of the writer's clock after they are freed.
func newArenas(nbuckets uint32, arenaBytes uint64, grace int64) (arenas, error) {
	if arenaBytes%inlineWord != 0 || arenaBytes > MaxArenaBytes || grace < 0 {
		return arenas{}, fmt.Errorf("%w: arena of %d bytes, grace %d", ErrBadConfig, arenaBytes, grace)
	}
	units := arenaBytes / inlineWord
	return arenas{
		nbuckets:   nbuckets,
		arenaBytes: arenaBytes,
		units:      units,
		taken:      make([]uint64, (uint64(nbuckets)*units+63)/64),
		grace:      grace,
	}, nil
}

// alloc takes the first run of n bytes (a multiple of 8, > 0) free in
// bucket b's arena, or reports false with nothing changed.
func (a *arenas) alloc(b uint32, n uint64) (off uint64, ok bool) {
	u, ok := a.find(b, n/inlineWord)
	if !ok {
		return 0, false
	}
	markBits(a.taken, a.unit(b, u), n/inlineWord, true)
	a.live += n
	return u * inlineWord, true
}

// fits reports whether alloc(b, n) would succeed.
func (a *arenas) fits(b uint32, n uint64) bool {
	_, ok := a.find(b, n/inlineWord)
	return ok
}

// free retires the block at off of n bytes in bucket b: to limbo, stamped
// now (the writer's clock, read after the slot store that stopped naming
// it).
func (a *arenas) free(b uint32, off, n uint64, now int64) {
	a.live -= n
	a.inLimbo += n
	a.limbo.push(limboEntry{off: uint64(b)*a.arenaBytes + off, n: n, at: now})
}

// freeNow frees a block at once, skipping limbo: only for blocks no reader
// can accept (a rebuild's moves, §5.7 step 5, or a block never published).
func (a *arenas) freeNow(b uint32, off, n uint64) {
	a.live -= n
	markBits(a.taken, a.unit(b, off/inlineWord), n/inlineWord, false)
}

// reclaim frees every limbo block stamped Gi or more before now.
func (a *arenas) reclaim(now int64) {
	for {
		e, ok := a.limbo.pop(now - a.grace)
		if !ok {
			return
		}
		a.inLimbo -= e.n
		markBits(a.taken, e.off/inlineWord, e.n/inlineWord, false)
	}
}

// lastRetired is the stamp of the youngest block in limbo, if any (a
// rebuild waits until limbo drains, §5.7 step 4).
func (a *arenas) lastRetired() (int64, bool) { return a.limbo.last() }

// takenBytes is how many bytes of bucket b's arena are taken (live or in
// limbo).
func (a *arenas) takenBytes(b uint32) uint64 {
	return countBits(a.taken, a.unit(b, 0), a.units) * inlineWord
}

// limboBytes is how many bytes of bucket b's arena are in limbo. It walks
// the whole limbo: for invariants and tests.
func (a *arenas) limboBytes(b uint32) uint64 {
	var n uint64
	for _, e := range a.limbo.entries() {
		if uint32(e.off/a.arenaBytes) == b {
			n += e.n
		}
	}
	return n
}

// unit is the bit of unit u of bucket b's arena.
func (a *arenas) unit(b uint32, u uint64) uint64 { return uint64(b)*a.units + u }

// find returns the first unit of the first run of k free units in bucket
// b's arena.
func (a *arenas) find(b uint32, k uint64) (uint64, bool) {
	lo := a.unit(b, 0)
	hi := lo + a.units
	start := lo
	for i := lo; i < hi; {
		w := a.taken[i/64] >> (i % 64) // the bits from i on; zeros shifted in
		if w&1 != 0 {
			i += uint64(bits.TrailingZeros64(^w)) // past the taken run
			start = i
			continue
		}
		free := 64 - i%64
		if w != 0 {
			free = uint64(bits.TrailingZeros64(w))
		}
		i = min(i+free, hi)
		if i-start >= k {
			return start - lo, true
		}
	}
	return 0, false
}

// markBits sets (on) or clears bits [i, i+k) of bm.
func markBits(bm []uint64, i, k uint64, on bool) {
	forMasks(i, k, func(w int, m uint64) {
		if on {
			bm[w] |= m
		} else {
			bm[w] &^= m
		}
	})
}

// countBits counts the set bits among [i, i+k) of bm.
func countBits(bm []uint64, i, k uint64) uint64 {
	var n int
	forMasks(i, k, func(w int, m uint64) { n += bits.OnesCount64(bm[w] & m) })
	return uint64(n)
}

// forMasks calls f with each bitmap word that bits [i, i+k) touch and the
// mask of those bits in it.
func forMasks(i, k uint64, f func(w int, m uint64)) {
	for k > 0 {
		s := i % 64
		c := min(k, 64-s)
		f(int(i/64), ^uint64(0)>>(64-c)<<s)
		i += c
		k -= c
	}
}

// check verifies the allocator against live, every block the caller holds
// (records named by slot words or being written, reserved blocks): each
// lies inside its bucket's arena, no two of them or of the limbo blocks
// overlap, the taken units are exactly theirs, and the byte counts match.
// Whether a bucket's live bytes stay within 8·a is the caller's to check
// (it knows a): takenBytes minus limboBytes, or the sum over live.
func (a *arenas) check(live []arenaBlock) error {
	seen := make([]uint64, len(a.taken))
	var liveBytes, limboBytes uint64
	for _, blk := range live {
		if err := a.claim(seen, blk); err != nil {
			return fmt.Errorf("live %w", err)
		}
		liveBytes += blk.n
	}
	for _, e := range a.limbo.entries() {
		blk := arenaBlock{bucket: uint32(e.off / a.arenaBytes), off: e.off % a.arenaBytes, n: e.n}
		if err := a.claim(seen, blk); err != nil {
			return fmt.Errorf("limbo %w", err)
		}
		limboBytes += e.n
	}
	for i := range seen {
		if seen[i] != a.taken[i] {
			return fmt.Errorf("arena bitmap word %d is %#x, the blocks held make %#x", i, a.taken[i], seen[i])
		}
	}
	if liveBytes != a.live || limboBytes != a.inLimbo {
		return fmt.Errorf("arena counts live %d, limbo %d; blocks held: %d, %d", a.live, a.inLimbo, liveBytes, limboBytes)
	}
	return nil
}

// claim marks blk's units in seen, or reports why it cannot be a block.
func (a *arenas) claim(seen []uint64, blk arenaBlock) error {
	if blk.bucket >= a.nbuckets || blk.n == 0 || blk.off%inlineWord != 0 || blk.n%inlineWord != 0 ||
		blk.n > a.arenaBytes || blk.off > a.arenaBytes-blk.n {
		return fmt.Errorf("block %+v is not inside an arena of %d bytes", blk, a.arenaBytes)
	}
	i, k := a.unit(blk.bucket, blk.off/inlineWord), blk.n/inlineWord
	if countBits(seen, i, k) != 0 {
		return fmt.Errorf("block %+v overlaps another", blk)
	}
	markBits(seen, i, k, true)
	return nil
}

// limboFIFO is a limbo whose entries all wait the same grace period, so
// they leave in the order they came (alloc.go's limbo is the same queue and
// could use this type).
type limboFIFO struct {
	q    []limboEntry // live entries from head
	head int
}

func (l *limboFIFO) push(e limboEntry) {
	// Move the live entries to the front rather than grow, once the dead
	// prefix is at least half of a full slice.
	if l.head > 0 && l.head >= len(l.q)/2 && len(l.q) == cap(l.q) {
		k := copy(l.q, l.q[l.head:])
		l.q = l.q[:k]
		l.head = 0
	}
	l.q = append(l.q, e)
}

// pop takes the oldest entry if it was stamped at or before cutoff.
func (l *limboFIFO) pop(cutoff int64) (limboEntry, bool) {
	if l.head == len(l.q) || l.q[l.head].at > cutoff {
		return limboEntry{}, false
	}
	e := l.q[l.head]
	l.head++
	if l.head == len(l.q) {
		l.q, l.head = l.q[:0], 0
	}
	return e, true
}

// last is the stamp of the youngest entry, if any.
func (l *limboFIFO) last() (int64, bool) {
	if l.head == len(l.q) {
		return 0, false
	}
	return l.q[len(l.q)-1].at, true
}

func (l *limboFIFO) entries() []limboEntry { return l.q[l.head:] }

// repack marks bucket b's arena as its first k units taken and the rest
// free: after packArena slid its blocks together. Live bytes are unchanged.
func (a *arenas) repack(b uint32, k uint64) {
	markBits(a.taken, a.unit(b, 0), a.units, false)
	markBits(a.taken, a.unit(b, 0), k, true)
}
