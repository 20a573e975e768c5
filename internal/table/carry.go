package table

import (
	"encoding/binary"
	"fmt"
)

// Moves of keys whose records are inline (docs/layout.md,
// "Inline records", Moves). An inline word names a block of its own bucket's arena,
// so it cannot simply be stored into the other bucket: the record goes
// with it. The copy (same content, version and state, under a tag rule T
// picks for its new block) goes into the destination bucket's arena, or
// into the record area in the Records format if that arena has no room; the
// new word is stored, the old slot cleared, and only then is the old copy
// marked dead and retired, stamped after the clear. Between the two stores
// both copies read live with the same metadata, which rule W allows (each
// is the key's current content), and the key is in one of its buckets at
// every instant (rule M1).

// canCarry reports whether the key whose word w (at pos) is would have
// room to take its record along to bucket v: search accepts v for it only
// then. A word that is not inline moves alone.
func (t *Table) canCarry(pos, w uint64, v uint32) bool {
	if !IsInline(w) {
		return true
	}
	old := t.resolve(pos, w)
	if t.arenas.fits(v, old.n) {
		return true
	}
	kl, vl := t.lens(old)
	return t.alloc.fits(RecordLen(kl, vl))
}

// takeCarries takes, in t.carries, the block each inline record of the
// chain ending at hop j is copied into, in relocate's order (entries for
// other keys are unused). Search checked each copy alone; several that
// fall back on the record area may not fit together, and then it gives
// everything back and fails.
func (t *Table) takeCarries(j int) error {
	t.carries = t.carries[:0]
	for ; t.hops[j].from >= 0; j = int(t.hops[j].from) {
		h := t.hops[j]
		src := t.hdr.SlotOffset(t.hops[h.from].bucket, int(h.slot))
		w := binary.LittleEndian.Uint64(t.mem[src:])
		var dst loc
		if IsInline(w) {
			var ok bool
			if dst, ok = t.carryBlock(t.resolve(src, w), h.bucket); !ok {
				t.dropCarries()
				return fmt.Errorf("%w: no room to move an inline record to bucket %d", ErrNoSpace, h.bucket)
			}
		}
		t.carries = append(t.carries, dst)
	}
	return nil
}

// carryBlock takes the block old's copy goes to when its key moves to
// bucket v: in v's arena if it has room, else in the record area.
func (t *Table) carryBlock(old loc, v uint32) (loc, bool) {
	// A block an earlier carry of this chain took in v is named by no slot
	// yet: arenaBlock then does not pack v, and the copy goes out of place.
	if l, ok := t.arenaBlock(v, old.n); ok {
		return l, true
	}
	kl, vl := t.lens(old)
	n := RecordLen(kl, vl)
	off, ok := t.alloc.alloc(n)
	return loc{off: off, n: n}, ok
}

// dropCarries gives back the blocks takeCarries took (none written).
func (t *Table) dropCarries() {
	for _, l := range t.carries {
		if l.n != 0 {
			t.dropBlock(l)
		}
	}
	t.carries = t.carries[:0]
}

// carry copies the inline record slot word w at src names into dst and
// returns the word that names the copy (from dst's bucket).
func (t *Table) carry(src, w uint64, dst loc) uint64 {
	old := t.resolve(src, w)
	s := DecodeInlineSlot(w)
	if dst.inline {
		s.Tag = t.st.copyInline(t.block(dst), t.block(old))
		s.Offset = dst.off - t.arenaBase(dst.bucket)
		return s.Word()
	}
	// Out of place: the Records format, same metadata and state. A spill,
	// like a Put's whose arena is full.
	t.spills++
	block := t.block(old)
	meta, kl, vl := inlineHeadOf(format4, block)
	key := t.keyAt(old)
	t.valBuf = appendPayload(t.valBuf[:0], block, format4.inlineHead()+kl, vl)
	encodeRecordState(t.block(dst), key, t.valBuf, meta, t.stateOf(old))
	t.payload += dst.n
	return Slot{Offset: dst.off, Len: dst.n, FP: s.FP}.Word()
}

// dropCarried retires the old copy of a moved inline record, once no slot
// names it: dead (unless it already was, a pending slot's), then to
// limbo, stamped now; in a rebuild's hiding phase, a copy that was never
// live is freed at once instead (reveal.go).
func (t *Table) dropCarried(src, w uint64) {
	old := t.resolve(src, w)
	neverLive := t.hiding && t.stateOf(old) == stateHidden
	if t.stateOf(old) != stateDead {
		t.unpublishing(src, w)
	}
	if neverLive {
		t.freeHidden(old)
		return
	}
	t.retireLoc(old, t.clock())
}
