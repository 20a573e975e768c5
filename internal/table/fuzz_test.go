package table

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

// FuzzVerifyRecord: arbitrary bytes never panic, and anything that verifies
// is exactly the record a writer would have written for that key, value and
// metadata (layout 4).
func FuzzVerifyRecord(f *testing.F) {
	for _, c := range []struct{ key, value string }{{"k", ""}, {"key", "value"}, {"a", "0123456789abcdef"}} {
		rec, s := makeRecord([]byte(c.key), []byte(c.value), 9, 1024)
		f.Add(rec, []byte(c.key), s.Word())
		f.Add(rec, []byte(c.key), s.Word()+1<<32)
		f.Add(rec[:len(rec)-8], []byte(c.key), s.Word())
		r3, s3 := makeRecord3([]byte(c.key), []byte(c.value), 9, 1024)
		f.Add(r3, []byte(c.key), s3.Word()) // layout 3's: not a layout 4 record
	}
	f.Add([]byte{}, []byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, rec, key []byte, w uint64) {
		s := DecodeSlot(w)
		// A layout 3 reader of the same bytes: no panic, and what it
		// accepts is the record a layout 3 writer wrote.
		if v3, m3, err := (Header{Version: LayoutVersion3}).VerifyRecord(rec, key, s); err == nil {
			if want, _ := makeRecord3(key, v3, m3.Mod, 0); !bytes.Equal(want, rec) {
				t.Fatalf("layout 3 reader accepted bytes its writer would not produce:\n got % x\nwant % x", rec, want)
			}
		}
		value, meta, err := VerifyRecord(rec, key, s)
		if err != nil {
			if value != nil || meta != (revision.Meta{}) {
				t.Fatalf("error %v with a value", err)
			}
			return
		}
		if uint64(len(rec)) != s.Len || len(key) == 0 || len(key) > MaxKey || len(value) > MaxValue {
			t.Fatalf("accepted %d bytes for a %d-byte slot, key %d, value %d", len(rec), s.Len, len(key), len(value))
		}
		want := make([]byte, len(rec))
		encodeRecord(want, key, value, meta)
		if !bytes.Equal(want, rec) {
			t.Fatalf("accepted bytes the writer would not produce:\n got % x\nwant % x", rec, want)
		}
	})
}

// FuzzParseHeader: arbitrary bytes never panic; a header that parses
// re-encodes to the same fields and bounds every record it accepts.
func FuzzParseHeader(f *testing.F) {
	for _, cfg := range []Config{{Buckets: 2}, {Buckets: 64}, {BytesPerSlot: 16}} {
		mem := make([]byte, 1<<16)
		if _, err := Format(mem, cfg); err != nil {
			f.Fatal(err)
		}
		f.Add(mem[:HeaderSize], uint64(0))
		f.Add(mem[:HeaderSize], Slot{Offset: 4096, Len: 64, FP: 1}.Word())
		f.Add(mem[:HeaderSize], Slot{Offset: 4096, Len: 64, FP: 1, Inline: true}.Word())
		v2 := asLayout2(append([]byte(nil), mem[:HeaderSize]...))
		f.Add(v2, Slot{Offset: 4096, Len: 64, FP: 1}.Word())
		f.Add(v2[:HeaderSize2], uint64(0))
		f.Add(withArenas(append([]byte(nil), mem[:HeaderSize]...), 64+8*48, 48), uint64(3))
		f.Add(withArenas(append([]byte(nil), mem[:HeaderSize]...), 128, 16), uint64(4)) // arena too small
	}
	f.Add(make([]byte, HeaderSize), uint64(1))
	f.Add([]byte("KVDTABLE"), uint64(2))
	f.Fuzz(func(t *testing.T, b []byte, w uint64) {
		h, err := ParseHeader(b)
		if err != nil {
			if h != (Header{}) {
				t.Fatalf("error %v with a header", err)
			}
			return
		}
		if h.RecordBase != h.Len()+uint64(h.Buckets)*uint64(h.BucketBytes) || h.BucketBytes%BucketSize != 0 ||
			(h.InlineMax == 0) != (h.BucketBytes == BucketSize) || uint64(h.BucketBytes-BucketSize) < 8*uint64(h.InlineMax) {
			t.Fatalf("accepted a header whose buckets do not add up: %+v", h)
		}
		again := make([]byte, HeaderSize)
		putHeader(again, h)
		copy(again, Magic)
		if h2, err := ParseHeader(again); err != nil || h2 != h {
			t.Fatalf("re-encoded header %+v, %v; want %+v", h2, err, h)
		}
		if s := DecodeSlot(w); h.InArea(s) && (s.Inline ||
			s.Offset < h.RecordBase || s.Offset+s.Len > h.RecordEnd || s.Len < MinRecord) {
			t.Fatalf("InArea accepts %+v outside [%d, %d)", s, h.RecordBase, h.RecordEnd)
		}
		var bucket [BucketSize]byte
		binary.LittleEndian.PutUint64(bucket[8:], w)
		var out [SlotsPerBucket]Slot
		if n := ScanBucket(bucket[:], uint16(w>>52), &out); n > 1 || n == 1 && out[0].Word() != w {
			t.Fatalf("ScanBucket found %d slots for one word", n)
		}
	})
}
