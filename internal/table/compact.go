package table

import "encoding/binary"

// Compaction: coalescing merges free neighbours, but free space can still
// be cut up by live records between the holes (small records written
// among large ones, then some deleted), so that a large record finds no
// extent while many bytes are free. Compact gathers such space: it picks
// the stretch of the record area with the fewest live bytes and moves its
// records elsewhere, each exactly as an update would move it (a new copy
// written in full, the key's slot word replaced with one atomic store, the
// old copy marked dead and put in limbo; the version is unchanged), so
// readers see nothing they do not already handle. Once the grace period
// has passed, the stretch is one free extent.

// Fragmented reports whether free space is cut up: the largest free
// extent holds less than half of the free bytes, and not the largest
// record there can be.
func (t *Table) Fragmented() bool {
	t.alloc.reclaim(t.clock() - t.grace)
	largest := t.alloc.largest()
	return t.alloc.free >= 2*MinRecord && largest < t.alloc.free/2 && largest < MaxRecord
}

// maxCells bounds the cells a compaction tallies live bytes in.
const maxCells = 4096

// pinned is the tally of a cell holding a reserved block or a pending
// slot's record: a compaction cannot empty it.
const pinned = 1 << 62

// Compact moves up to budget bytes of live records out of the stretch of
// the record area where they are fewest, if free space is fragmented, and
// returns how many bytes it moved. A compaction waits for the space of the
// previous one to leave limbo.
func (t *Table) Compact(budget uint64) uint64 {
	// Not inside an atomic group: its hidden records stay where EndAtomic
	// looks for them (a compaction waits for the next call).
	if t.atomic || t.clock() < t.compactAgain || !t.Fragmented() {
		return 0
	}
	a := &t.alloc
	// The stretch is two adjacent cells, together half the free bytes (at
	// least 4 KiB, and no more than maxCells cells in the area).
	area := a.end - a.base
	cell := max(a.free/4, 2<<10, area/maxCells) &^ (RecordAlign - 1)
	ncells := int((area + cell - 1) / cell)
	live := t.cells[:0]
	for range ncells {
		live = append(live, 0)
	}
	t.cells = live
	t.eachRecord(func(pos uint64, s Slot) {
		if t.pending(pos, s.Word()) { // dead, its slot waiting to clear (evict.go): not moved
			t.pin(live, s.Offset, s.Len, cell)
			return
		}
		for o := s.Offset; o < s.Offset+s.Len; {
			c := (o - a.base) / cell
			next := min(s.Offset+s.Len, a.base+(c+1)*cell)
			live[c] += next - o
			o = next
		}
	})
	for _, g := range t.resv {
		for _, sz := range g.sizes {
			for _, off := range sz.blocks {
				t.pin(live, off, sz.n, cell)
			}
		}
	}
	best, bestLive := -1, uint64(pinned)
	for c := 0; c+1 < ncells; c++ {
		if l := live[c] + live[c+1]; l < bestLive {
			best, bestLive = c, l
		}
	}
	if best < 0 {
		return 0
	}
	lo := a.base + uint64(best)*cell
	hi := min(lo+2*cell, a.end)
	t.held = a.hold(lo, hi, t.held[:0])
	var moved uint64
	t.eachRecord(func(pos uint64, s Slot) {
		if moved >= budget || s.Offset >= hi || s.Offset+s.Len <= lo || s.Len > hi-lo || t.pending(pos, s.Word()) {
			return
		}
		off, ok := a.alloc(s.Len)
		if !ok {
			return
		}
		copy(t.mem[off:off+s.Len], t.mem[s.Offset:s.Offset+s.Len])
		ns := Slot{Offset: off, Len: s.Len, FP: s.FP}
		t.checkCopy(s, ns)
		// The copy is live before the store and the original after it:
		// both carry the key's current version, so either reads right.
		t.st.word(t.mem, pos, ns.Word())
		t.unpublishing(pos, s.Word())
		t.retire(pos, s.Word(), t.clock()) // stamped after the store, as for an update
		t.payload += s.Len
		moved += s.Len
	})
	a.unhold(t.held)
	t.compacted += moved
	if moved > 0 {
		t.compactAgain = t.clock() + t.grace
	}
	return moved
}

// Compacted is how many bytes of records Compact has moved, ever
// (Stats.Compacted, without the work Stats does).
func (t *Table) Compacted() uint64 { return t.compacted }

// pin marks the cells that n bytes at off touch as ones a compaction
// cannot empty.
func (t *Table) pin(live []uint64, off, n, cell uint64) {
	for c := (off - t.alloc.base) / cell; c <= (off+n-1-t.alloc.base)/cell; c++ {
		live[c] = pinned
	}
}

// eachRecord calls fn for every published slot naming a record in the
// record area: its position and word. fn may replace the word at pos.
// Inline records are not the record area's to compact (re-inlining and
// arena defragmentation are design steps 6).
func (t *Table) eachRecord(fn func(pos uint64, s Slot)) {
	for pos := range t.slotWords() {
		if w := binary.LittleEndian.Uint64(t.mem[pos:]); w != 0 && !IsInline(w) {
			fn(pos, DecodeSlot(w))
		}
	}
}
