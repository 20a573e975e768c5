package table

import "fmt"

// Put stores value under key with the given version, out of place: the new
// record is written in full, hidden; the record it replaces is marked dead;
// the new one is published by one atomic store of the key's slot word and
// turns live; the old one's space goes to limbo. So a record that reads
// live is always its key's current one, which is what lets a reader with a
// cached location read the record alone (docs/layout.md, "Writing"). A new
// key may first move other keys between their buckets to make room
// (place.go). If the key has reservations (Reserve), Put uses their block
// and slot and cannot fail for space. On error (ErrNoSpace, or a size
// error) the table is unchanged.
func (t *Table) Put(key, value []byte, version uint64) error {
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
	n := RecordLen(len(key), len(value))
	t.alloc.reclaim(t.clock() - t.grace)
	var off uint64
	ok := false
	if g != nil {
		if off, ok = g.takeBlock(n); ok {
			t.alloc.fill(n)
		}
	}
	if !ok {
		if off, ok = t.alloc.alloc(n); !ok {
			return t.noBlock(n)
		}
	}
	pos := t.commit(&p)
	encodeRecordState(t.mem[off:off+n], key, value, version, stateHidden)
	if t.atomic {
		t.hide(off, key) // EndAtomic turns it live with the rest of the group
	}
	slot := Slot{Offset: off, Len: n, FP: Fingerprint(h)}
	t.checkWritten(off, slot, key, value, version)
	// An evicted key whose slot is pending (evict.go) is updated in place:
	// its record is dead already, and the key is back once the store is.
	wasPending := p.found && t.pending(p.old)
	if p.found && !wasPending {
		t.unpublishing(p.old) // dead before the store: never live and unnamed
	}
	storeWord(t.mem, pos, slot.Word())
	if !t.atomic {
		storeHalf(t.mem, off+recState, stateLive)
	}
	if p.found {
		// Stamped after the store: a reader may have read the old slot word
		// until this moment, and the grace period must cover it from here.
		t.retire(p.old, t.clock())
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
	t.payload += n
	return nil
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
	if t.pending(old) {
		// Evicted, its clearing pending: the node no longer holds the key,
		// so it may go at once.
		t.pendingSlots--
	} else {
		t.unpublishing(old)
		t.records--
	}
	t.unpublish(pos, old)
	return true, nil
}

// unpublishing marks the record behind slot word w dead: before its slot
// stops naming it (a record must not read live while no slot names it),
// except for a compaction's move, whose copy carries the same version.
func (t *Table) unpublishing(w uint64) {
	s := DecodeSlot(w)
	t.checkRetiring(s)
	storeHalf(t.mem, s.Offset+recState, stateDead)
}

// retire puts the block of the (dead) record behind slot word w in limbo,
// stamped now.
func (t *Table) retire(w uint64, now int64) {
	s := DecodeSlot(w)
	t.alloc.retire(s.Offset, s.Len, now)
	t.payload -= s.Len
}
