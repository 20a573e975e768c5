package table

import (
	"fmt"

	"github.com/kvd-project/kvd/internal/revision"
)

// Put stores value under key with the key's revision metadata, out of place: the new
// record is written in full, hidden, in fresh bytes (with arenas, a record
// of at most InlineMax bytes in the tagged format goes into the arena of
// its slot's bucket if that has room, docs/layout.md "Inline records";
// else into the record area); the record it replaces is marked dead;
// the new one is published by one atomic store of the key's slot word and
// turns live; the old one's space goes to limbo. So a record that reads
// live is always its key's current one, which is what lets a reader with a
// cached location read the record alone (docs/layout.md, "Writing"). A new
// key may first move other keys between their buckets to make room
// (place.go). If the key has reservations (Reserve), Put uses their block
// and slot and cannot fail for space. On error (ErrNoSpace, or a size
// error) the table is unchanged.
func (t *Table) Put(key, value []byte, meta revision.Meta) error {
	if err := checkSizes(key, len(value)); err != nil {
		return err
	}
	t.clearPending()
	h := Hash(key)
	g := t.group(key)
	p, err := t.place(key, h, g)
	if err != nil {
		return err
	}
	t.reclaim()
	dst, err := t.newBlock(key, value, t.placeBucket(&p), g)
	if err != nil {
		return err
	}
	if p.found {
		p.old = loadWord(t.mem, p.pos) // newBlock may have packed the arena (pack.go)
	}
	pos, err := t.commit(&p)
	if err != nil {
		t.dropBlock(dst)
		return err
	}
	t.settleReservation(&dst, key, value, g)
	if !dst.inline && t.inlineFits(len(key), len(value)) {
		t.spills++ // its arena is full: out of place until re-inlined (step 6)
	}
	w := t.writeHidden(dst, key, value, meta, Fingerprint(h))
	if t.atomic {
		t.remember(key) // EndAtomic turns it live with the rest of the group
	}
	t.checkWritten(pos, w, key, value, meta)
	// An evicted key whose slot is pending (evict.go) is updated in place:
	// its record is dead already, and the key is back once the store is.
	wasPending := p.found && t.pending(pos, p.old)
	if p.found && !wasPending {
		t.unpublishing(pos, p.old) // dead before the store: never live and unnamed
	}
	t.st.word(t.mem, pos, w)
	if !t.atomic && !t.hiding { // else EndAtomic, or Reveal, turns it live
		t.setState(dst, stateLive)
	}
	if p.found {
		// Stamped after the store: a reader may have read the old slot word
		// until this moment, and the grace period must cover it from here.
		t.retire(pos, p.old, t.clock())
		if wasPending {
			t.pendingSlots--
			t.records++
		}
	} else {
		t.records++
		t.stampPlaced(pos)
		if p.held {
			t.unhold(g)
		}
		b, _ := t.hdr.slotIndex(pos)
		t.checkBucket(b)
	}
	return nil
}

// FitsInline reports whether a record of a key and value of these lengths
// is small enough to live inline (with arenas: its InlineLen is at most
// InlineMax). A rebuild that waited for the arenas' limbo puts every such
// record inline, so only the others need the record area's room.
func (t *Table) FitsInline(keyLen, valueLen int) bool { return t.inlineFits(keyLen, valueLen) }

// inlineFits reports whether a record of key and value is small enough to
// live inline (a length in the tagged format, InlineLen).
func (t *Table) inlineFits(keyLen, valueLen int) bool {
	return t.hdr.InlineMax > 0 && InlineLen(keyLen, valueLen) <= uint64(t.hdr.InlineMax)
}

// newBlock chooses the bytes of a Put's record whose slot will be in
// bucket b (docs/layout.md, "Inline records", Put): a block of
// b's arena if the record is small and the arena has room, else a block of
// the record area, taken now unless the key's reservations hold one (Put
// takes that after its moves, settleReservation). Limbo must be reclaimed.
func (t *Table) newBlock(key, value []byte, b uint32, g *resvKey) (loc, error) {
	if t.inlineFits(len(key), len(value)) {
		n := InlineLen(len(key), len(value))
		if l, ok := t.arenaBlock(b, n); ok {
			return l, nil
		}
	}
	n := RecordLen(len(key), len(value))
	if g != nil {
		if i := g.size(n); i >= 0 && len(g.sizes[i].blocks) > 0 {
			return loc{n: n}, nil // off 0: the reserved block, taken later
		}
	}
	off, ok := t.alloc.alloc(n)
	if !ok {
		return loc{}, t.noBlock(n)
	}
	return loc{off: off, n: n}, nil
}

// dropBlock gives back a block newBlock took, never written (the moves
// that were to make room could not be carried out).
func (t *Table) dropBlock(l loc) {
	switch {
	case l.inline:
		t.arenas.freeNow(l.bucket, l.off-t.arenaBase(l.bucket), l.n)
	case l.off != 0:
		t.alloc.unalloc(l.off, l.n)
	}
}

// settleReservation squares a Put with its key's reservations (Reserve
// set aside a record-area block of the out-of-place length): a record
// going out of place takes that block if newBlock left it; one going
// inline releases it at once (never written: no limbo), so that the key's
// blocks never outnumber its writes in flight.
func (t *Table) settleReservation(dst *loc, key, value []byte, g *resvKey) {
	if g == nil {
		return
	}
	n := RecordLen(len(key), len(value))
	if dst.inline {
		if off, ok := g.takeBlock(n); ok {
			t.alloc.unreserve(off, n)
		}
		return
	}
	if dst.off == 0 {
		dst.off, _ = g.takeBlock(n)
		t.alloc.fill(n)
	}
}

// writeHidden writes the record at dst, hidden (rule W; an inline record
// under a tag chosen by rule T), and returns the slot word naming it.
func (t *Table) writeHidden(dst loc, key, value []byte, meta revision.Meta, fp uint16) uint64 {
	if dst.inline {
		var tag uint8
		tag, t.inlineBuf = t.st.writeInline(t.block(dst), t.inlineBuf, key, value, meta, stateHidden)
		s := InlineSlot{Offset: dst.off - t.arenaBase(dst.bucket), Len: dst.n, Tag: tag, Mod: uint32(meta.Mod), FP: fp}
		return s.Word()
	}
	encodeRecordState(t.block(dst), key, value, meta, stateHidden)
	t.payload += dst.n
	return Slot{Offset: dst.off, Len: dst.n, FP: fp}.Word()
}

// CanPut reports the error a Put of key with a value of valueLen bytes would
// return now, without writing anything. While nothing else is written,
// space only grows (limbo drains, stamps age), so a nil answer holds until
// the next write. It reserves nothing: to admit writes that are applied
// later, use Reserve.
func (t *Table) CanPut(key []byte, valueLen int) error {
	if err := checkSizes(key, valueLen); err != nil {
		return err
	}
	h := Hash(key)
	g := t.group(key)
	if _, err := t.place(key, h, g); err != nil {
		return err
	}
	n := RecordLen(len(key), valueLen)
	if g != nil {
		if i := g.size(n); i >= 0 && len(g.sizes[i].blocks) > 0 {
			return nil
		}
	}
	t.alloc.reclaim(t.clock() - t.grace)
	if !t.alloc.fits(n) {
		return t.noBlock(n)
	}
	return nil
}

func checkSizes(key []byte, valueLen int) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if valueLen > MaxValue {
		return fmt.Errorf("%w: %d bytes", ErrValueTooLarge, valueLen)
	}
	return nil
}

func (t *Table) noBlock(n uint64) error {
	return fmt.Errorf("%w: no block for a %d-byte record (%d bytes free, largest free extent %d, %d in limbo)",
		ErrNoSpace, n, t.alloc.free, t.alloc.largest(), t.alloc.inLimbo)
}

// Delete unpublishes key's record (its slot word becomes 0), marks it dead
// and puts it in limbo. It reports whether the key had a slot (an evicted
// key's pending slot too, which it clears at once). If writes of the key
// are in flight (Reserve), its slot is held for them.
func (t *Table) Delete(key []byte) (existed bool, err error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	t.clearPending()
	pos, old, found := t.find(key, Hash(key))
	if !found {
		return false, nil
	}
	if t.pending(pos, old) {
		// Evicted, its clearing pending: the node no longer holds the key,
		// so it may go at once.
		t.pendingSlots--
	} else {
		t.unpublishing(pos, old)
		t.records--
	}
	t.unpublish(pos, old)
	return true, nil
}

// unpublishing marks the record behind slot word w at pos dead: before
// its slot stops naming it (a record must not read live while no slot
// names it), except for a compaction's or move's copy, which carries the
// same metadata.
func (t *Table) unpublishing(pos, w uint64) {
	t.checkRetiring(pos, w)
	t.setState(t.resolve(pos, w), stateDead)
}

// retire puts the block of the (dead) record behind slot word w at pos in
// limbo, stamped now.
func (t *Table) retire(pos, w uint64, now int64) {
	t.retireLoc(t.resolve(pos, w), now)
}
