package table

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func TestSlotRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []Slot{
		{Offset: 8, Len: 32, FP: 1},
		{Offset: 192, Len: 1064, FP: 0xabc},
		{Offset: MaxArea - 8, Len: MaxRecord, FP: 0xfff},
		{Offset: 1 << 34, Len: (1<<slotLenBits - 1) * RecordAlign, FP: 0x800},
		{Offset: 8, Len: 32, FP: 1, Inline: true},
		{Offset: MaxArea - 8, Len: (1<<slotLenBits - 1) * RecordAlign, FP: 0xfff, Inline: true},
	}
	for _, s := range tests {
		w := s.Word()
		if w == 0 {
			t.Errorf("%+v encodes as the empty word", s)
		}
		if got := DecodeSlot(w); got != s {
			t.Errorf("DecodeSlot(%+v.Word()) = %+v", s, got)
		}
	}
	if DecodeSlot(0) != (Slot{}) {
		t.Error("empty word does not decode to the zero Slot")
	}
	// Layout bits, spelled out once by hand.
	w := Slot{Offset: 3 * 8, Len: 5 * 8, FP: 7}.Word()
	if want := uint64(3) | 5<<32 | 7<<52; w != want {
		t.Errorf("word %#x, want %#x", w, want)
	}
	if w := (Slot{Offset: 3 * 8, Len: 5 * 8, FP: 7, Inline: true}).Word(); w != 3|5<<32|1<<51|7<<52 {
		t.Errorf("inline word %#x", w)
	}
}

// TestSlotWordAnyRoundTrips: every word decodes to a Slot that encodes it
// again (a client compares words it decoded), and the kind bit is bit 51.
func TestSlotWordAnyRoundTrips(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		w := r.Uint64()
		s := DecodeSlot(w)
		if s.Word() != w {
			t.Fatalf("DecodeSlot(%#x).Word() = %#x", w, s.Word())
		}
		if s.Inline != (w>>51&1 == 1) || s.FP != uint16(w>>52) {
			t.Fatalf("word %#x decodes to %+v", w, s)
		}
	}
}

// TestLayout2WordsAreOutOfPlace: a layout 2 word of the longest record
// decodes as an out-of-place word, with its length: one decoder reads both
// layouts.
func TestLayout2WordsAreOutOfPlace(t *testing.T) {
	t.Parallel()
	w := uint64((MaxArea-MaxRecord)/8) | uint64(MaxRecord/8)<<32 | 0xfff<<52 // layout 2: length in bits 32-51
	if s := DecodeSlot(w); s.Inline || s.Len != MaxRecord || s.Offset != MaxArea-MaxRecord || s.FP != 0xfff {
		t.Fatalf("layout 2 word %#x decodes to %+v", w, s)
	}
}

func TestBuckets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		h      uint64
		n      uint32
		b1, b2 uint32
	}{
		{h: 0x0000_0005_0000_0003, n: 8, b1: 3, b2: 5},
		{h: 0x0000_0003_0000_0003, n: 8, b1: 3, b2: 2}, // equal: b1^1
		{h: 0x0000_0000_0000_0000, n: 2, b1: 0, b2: 1},
		{h: 0xffff_ffff_ffff_ffff, n: 2, b1: 1, b2: 0},
		{h: 0x1234_5678_9abc_def0, n: 1 << 16, b1: 0xdef0, b2: 0x5678},
		{h: 0x0000_0001_0000_0000, n: 1 << 28, b1: 0, b2: 1},
	}
	for _, tc := range tests {
		b1, b2 := Buckets(tc.h, tc.n)
		if b1 != tc.b1 || b2 != tc.b2 {
			t.Errorf("Buckets(%#x, %d) = %d, %d, want %d, %d", tc.h, tc.n, b1, b2, tc.b1, tc.b2)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		h, n := r.Uint64(), uint32(2)<<r.IntN(27)
		b1, b2 := Buckets(h, n)
		if b1 == b2 || b1 >= n || b2 >= n {
			t.Fatalf("Buckets(%#x, %d) = %d, %d", h, n, b1, b2)
		}
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		h  uint64
		fp uint16
	}{
		{0, 1},
		{1<<52 - 1, 1},
		{1 << 52, 1},
		{2 << 52, 2},
		{0xfff0_0000_0000_0000, 0xfff},
		{0xabcd_ef01_2345_6789, 0xabc},
	}
	for _, tc := range tests {
		if got := Fingerprint(tc.h); got != tc.fp {
			t.Errorf("Fingerprint(%#x) = %#x, want %#x", tc.h, got, tc.fp)
		}
	}
}

func TestHash(t *testing.T) {
	t.Parallel()
	// xxHash64, seed 0, reference values.
	tests := []struct {
		key string
		h   uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"abc", 0x44bc2cf5ad770999},
	}
	for _, tc := range tests {
		if got := Hash([]byte(tc.key)); got != tc.h {
			t.Errorf("Hash(%q) = %#x, want %#x", tc.key, got, tc.h)
		}
	}
}

func TestScanBucket(t *testing.T) {
	t.Parallel()
	words := [SlotsPerBucket]uint64{
		0,
		Slot{Offset: 64, Len: 32, FP: 5}.Word(),
		Slot{Offset: 128, Len: 40, FP: 6}.Word(),
		0,
		Slot{Offset: 256, Len: 48, FP: 5}.Word(),
		Slot{Offset: 512, Len: 32, FP: 0x7ff}.Word(),
		0,
		Slot{Offset: 1024, Len: 56, FP: 5}.Word(),
	}
	var bucket [BucketSize]byte
	for i, w := range words {
		binary.LittleEndian.PutUint64(bucket[i*8:], w)
	}
	tests := []struct {
		fp   uint16
		want []uint64 // offsets, in slot order
	}{
		{5, []uint64{64, 256, 1024}},
		{6, []uint64{128}},
		{0x7ff, []uint64{512}},
		{7, nil},
		{0, nil}, // empty slots never match
	}
	for _, tc := range tests {
		var out [SlotsPerBucket]Slot
		n := ScanBucket(bucket[:], tc.fp, &out)
		if n != len(tc.want) {
			t.Errorf("fp %#x: %d matches, want %d", tc.fp, n, len(tc.want))
			continue
		}
		for i, off := range tc.want {
			if out[i].Offset != off || out[i].FP != tc.fp {
				t.Errorf("fp %#x: match %d is %+v, want offset %d", tc.fp, i, out[i], off)
			}
		}
	}
	full := bucket
	for i := range SlotsPerBucket {
		binary.LittleEndian.PutUint64(full[i*8:], Slot{Offset: 64, Len: 32, FP: 9}.Word())
	}
	var out [SlotsPerBucket]Slot
	if n := ScanBucket(full[:], 9, &out); n != SlotsPerBucket {
		t.Errorf("full bucket: %d matches", n)
	}
}
