package table

import "fmt"

// Put stores value under key with the given version, out of place: the new
// record is written in full, published by one atomic store of the key's slot
// word, and the record it replaces is marked dead and put in limbo. On error
// (ErrNoSpace, or a size error) the table is unchanged.
func (t *Table) Put(key, value []byte, version uint64) error {
	h := Hash(key)
	pos, old, found, err := t.place(key, len(value), h)
	if err != nil {
		return err
	}
	n := RecordLen(len(key), len(value))
	t.alloc.reclaim(t.clock() - t.grace)
	off, ok := t.alloc.alloc(n)
	if !ok {
		return t.noBlock(n)
	}
	encodeRecord(t.mem[off:off+n], key, value, version)
	slot := Slot{Offset: off, Len: n, FP: Fingerprint(h)}
	t.checkWritten(off, slot, key, value, version)
	storeWord(t.mem, pos, slot.Word())
	if found {
		// Stamped after the store: a reader may have read the old slot word
		// until this moment, and the grace period must cover it from here.
		t.retire(old, t.clock())
	} else {
		t.records++
	}
	t.payload += n
	return nil
}

// CanPut reports the error a Put of key with a value of valueLen bytes would
// return now, without writing anything; the server asks it before proposing
// a write, so that writes the region cannot hold are refused up front. While
// nothing else is written, space only grows (limbo drains), so a nil answer
// holds until the next write. Other replicas may still lack the space.
func (t *Table) CanPut(key []byte, valueLen int) error {
	if _, _, _, err := t.place(key, valueLen, Hash(key)); err != nil {
		return err
	}
	n := RecordLen(len(key), valueLen)
	t.alloc.reclaim(t.clock() - t.grace)
	if !t.alloc.fits(n) {
		return t.noBlock(n)
	}
	return nil
}

// place checks a Put's sizes and finds the slot it would publish into: the
// key's own (found, with its current word old) or an empty one.
func (t *Table) place(key []byte, valueLen int, h uint64) (pos, old uint64, found bool, err error) {
	if err := checkKey(key); err != nil {
		return 0, 0, false, err
	}
	if valueLen > MaxValue {
		return 0, 0, false, fmt.Errorf("%w: %d bytes", ErrValueTooLarge, valueLen)
	}
	if pos, old, found = t.find(key, h); found {
		return pos, old, true, nil
	}
	b1, b2 := Buckets(h, t.hdr.Buckets)
	pos, ok := t.emptySlot(b1, b2)
	if !ok {
		return 0, 0, false, fmt.Errorf("%w: buckets %d and %d are full", ErrNoSpace, b1, b2)
	}
	return pos, 0, false, nil
}

func (t *Table) noBlock(n uint64) error {
	return fmt.Errorf("%w: no block for a %d-byte record (%d bytes free, %d in limbo)",
		ErrNoSpace, n, t.alloc.freeBytes(), t.alloc.inLimbo)
}

// Delete unpublishes key's record (its slot word becomes 0), marks it dead
// and puts it in limbo. It reports whether the key existed.
func (t *Table) Delete(key []byte) (existed bool, err error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	pos, old, found := t.find(key, Hash(key))
	if !found {
		return false, nil
	}
	storeWord(t.mem, pos, 0)
	t.retire(old, t.clock())
	t.records--
	return true, nil
}

// retire marks the record behind slot word w dead and puts its block in
// limbo, stamped now.
func (t *Table) retire(w uint64, now int64) {
	s := DecodeSlot(w)
	t.checkRetiring(s)
	storeHalf(t.mem, s.Offset+recState, stateDead)
	t.alloc.retire(s.Offset, s.Len, now)
	t.payload -= s.Len
}
