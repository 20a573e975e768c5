package table

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Get looks key up in the local region and returns a copy of its value.
// Invalid keys are simply not found. The record is verified as a remote
// reader would (checksum, key, state): a record damaged in memory is
// reported with ErrTorn, never served.
func (t *Table) Get(key []byte) (value []byte, version uint64, ok bool, err error) {
	if checkKey(key) != nil {
		return nil, 0, false, nil
	}
	_, w, found := t.find(key, Hash(key))
	if !found || t.pending(w) { // an evicted key's slot, waiting to clear: not in the region
		return nil, 0, false, nil
	}
	s := DecodeSlot(w)
	v, version, err := VerifyRecord(t.mem[s.Offset:s.Offset+s.Len], key, s)
	if err != nil {
		return nil, 0, false, err
	}
	return append([]byte{}, v...), version, true, nil
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
			off := DecodeSlot(w).Offset
			kl := uint64(binary.LittleEndian.Uint16(t.mem[off+recKeyLen:]))
			if bytes.Equal(t.mem[off+recKey:off+recKey+kl], key) {
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
