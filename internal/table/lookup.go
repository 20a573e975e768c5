package table

import (
	"encoding/binary"
	"fmt"

	"github.com/kvd-project/kvd/internal/revision"
)

// Get looks key up in the local region and returns a copy of its value.
// Invalid keys are simply not found. The record is verified as a remote
// reader would (checksum, key, state): a record damaged in memory is
// reported with ErrTorn, never served. meta is the key's revision
// metadata, as the Put that wrote the value carried it.
func (t *Table) Get(key []byte) (value []byte, meta revision.Meta, ok bool, err error) {
	if checkKey(key) != nil {
		return nil, revision.Meta{}, false, nil
	}
	pos, w, found := t.find(key, Hash(key))
	if !found || t.pending(pos, w) { // an evicted key's slot, waiting to clear: not in the region
		return nil, revision.Meta{}, false, nil
	}
	v, meta, state, err := t.verifyAt(pos, w, key, []byte{})
	if err == nil && state == stateHidden && t.hiding {
		// A rebuild's record, not yet revealed (reveal.go): not in the
		// region for readers yet, and the flag is set.
		return nil, revision.Meta{}, false, nil
	}
	if err == nil {
		err = stateErr(state)
	}
	if err != nil {
		return nil, revision.Meta{}, false, err
	}
	if !IsInline(w) {
		v = append([]byte{}, v...) // a subslice of the region
	}
	return v, meta, true, nil
}

// find returns the position and word of key's slot, if it has one. The
// writer trusts its own bytes, so it reads them plainly.
func (t *Table) find(key []byte, h uint64) (pos, w uint64, ok bool) {
	fp := Fingerprint(h)
	b1, b2 := Buckets(h, t.hdr.Buckets)
	for _, b := range [2]uint32{b1, b2} {
		for s := range SlotsPerBucket {
			pos := t.hdr.SlotOffset(b, s)
			w := binary.LittleEndian.Uint64(t.mem[pos:])
			if w == 0 || DecodeSlot(w).FP != fp {
				continue
			}
			if t.keyIs(t.resolve(pos, w), key) {
				return pos, w, true
			}
		}
	}
	return 0, 0, false
}

func checkKey(key []byte) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > MaxKey:
		return fmt.Errorf("%w: %d bytes", ErrKeyTooLarge, len(key))
	}
	return nil
}
