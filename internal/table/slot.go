package table

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Slot word fields (docs/layout.md, "Slots"). Layout 2's length field had
// 20 bits, but no valid layout 2 word sets its top bit (records are at most
// MaxRecord, about 1 MiB), so one decoder reads both layouts.
const (
	slotOffBits   = 32
	slotLenBits   = 19
	slotKindShift = slotOffBits + slotLenBits // bit 51: 1 = inline
	slotFPShift   = slotKindShift + 1
	slotFPBits    = 12
	slotLenMask   = 1<<slotLenBits - 1
	slotInline    = 1 << slotKindShift
)

// Slot is a decoded slot word: where a record lives, how long it is, and the
// fingerprint of its key. The zero Slot is an empty slot.
//
// An inline word (Inline set) names a record in its bucket's arena with
// other fields (docs/layout.md): Offset and Len hold its bits 0-31 and
// 32-50 as an out-of-place word's would, only so that Word gives the word
// back; InlineSlot decodes its own fields. Header.InArea rejects it.
type Slot struct {
	Offset uint64 // of the record, from the start of the region
	Len    uint64 // of the record, including padding
	FP     uint16 // 12 bits of the key's hash, never 0 in a used slot
	Inline bool   // the kind bit: the record is in the bucket's arena
}

// DecodeSlot splits a slot word into its fields. It accepts any word; a
// reader checks the result with Header.InArea before trusting it.
func DecodeSlot(w uint64) Slot {
	return Slot{
		Offset: (w & (1<<slotOffBits - 1)) * RecordAlign,
		Len:    (w >> slotOffBits & slotLenMask) * RecordAlign,
		FP:     uint16(w >> slotFPShift),
		Inline: w&slotInline != 0,
	}
}

// Word encodes s as a slot word. s must have come from DecodeSlot or name a
// real record (Offset and Len multiples of 8 and in range, FP in 1..4095).
func (s Slot) Word() uint64 {
	w := s.Offset/RecordAlign | s.Len/RecordAlign<<slotOffBits | uint64(s.FP)<<slotFPShift
	if s.Inline {
		w |= slotInline
	}
	return w
}

// Hash is the key hash every choice in the layout derives from: xxHash64
// with seed 0.
func Hash(key []byte) uint64 {
	return xxhash.Sum64(key)
}

// Buckets returns a key's two candidate buckets for hash h. nbuckets must be
// a power of two >= 2 (ParseHeader guarantees it); the two are always
// distinct.
func Buckets(h uint64, nbuckets uint32) (b1, b2 uint32) {
	mask := uint64(nbuckets - 1)
	b1 = uint32(h & mask)
	b2 = uint32(h >> 32 & mask)
	if b1 == b2 {
		b2 = b1 ^ 1
	}
	return b1, b2
}

// Fingerprint is the 12-bit tag stored in a key's slot: the hash's top 12
// bits, with 0 (the empty slot's tag) mapped to 1.
func Fingerprint(h uint64) uint16 {
	fp := uint16(h >> (64 - slotFPBits))
	if fp == 0 {
		fp = 1
	}
	return fp
}

// ScanBucket decodes the slots of one bucket (BucketSize bytes as READ) whose
// fingerprint is fp into out, in slot order, and returns how many it found.
// It does not allocate. bucket shorter than BucketSize panics.
func ScanBucket(bucket []byte, fp uint16, out *[SlotsPerBucket]Slot) int {
	bucket = bucket[:BucketSize]
	n := 0
	for i := 0; i < BucketSize; i += SlotSize {
		w := binary.LittleEndian.Uint64(bucket[i:])
		if w != 0 && uint16(w>>slotFPShift) == fp {
			out[n] = DecodeSlot(w)
			n++
		}
	}
	return n
}
