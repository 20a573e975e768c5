package table

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"unsafe"

	"github.com/kvd-project/kvd/internal/revision"
)

// makeRecord encodes a record into fresh memory and returns it with the slot
// a writer would publish for it at offset off.
func makeRecord(key, value []byte, version, off uint64) ([]byte, Slot) {
	n := RecordLen(len(key), len(value))
	rec := make([]byte, n)
	encodeRecord(rec, key, value, mv(version))
	return rec, Slot{Offset: off, Len: n, FP: Fingerprint(Hash(key))}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		keyLen     int
		valueLen   int
		wantRecLen uint64
	}{
		{"1B key, empty value", 1, 0, 56},
		{"exactly 8-aligned", 8, 0, 56},
		{"one over alignment", 8, 1, 64},
		{"typical", 16, 100, 168},
		{"max key", MaxKey, 0, 48 + 1024},
		{"max value", 1, MaxValue, 48 + 8 + MaxValue},
		{"max both", MaxKey, MaxValue, MaxRecord},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, value := pattern(tc.keyLen, 1), pattern(tc.valueLen, 2)
			if n := RecordLen(tc.keyLen, tc.valueLen); n != tc.wantRecLen {
				t.Fatalf("RecordLen = %d, want %d", n, tc.wantRecLen)
			}
			rec, s := makeRecord(key, value, 0xdead_beef_0042, 4096)
			got, ver, err := VerifyRecord(rec, key, s)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, value) || ver != mv(0xdead_beef_0042) {
				t.Fatalf("got %d bytes, metadata %+v", len(got), ver)
			}
			if len(got) > 0 && unsafe.Pointer(&got[0]) != unsafe.Pointer(&rec[RecordHeaderSize+tc.keyLen]) {
				t.Fatal("value is not a subslice of the record")
			}
			if cap(got) != len(got) {
				t.Fatal("value's capacity reaches past it: appends would overwrite the record")
			}
			// Padding is zero and covered by the crc.
			for _, b := range rec[RecordHeaderSize+tc.keyLen+tc.valueLen:] {
				if b != 0 {
					t.Fatal("padding not zero")
				}
			}
			if crc := crc32.Checksum(rec[8:], crc32.MakeTable(crc32.Castagnoli)); binary.LittleEndian.Uint32(rec) != crc {
				t.Fatal("crc is not CRC-32C of bytes 8..len")
			}
		})
	}
}

func TestVerifyRecordRejects(t *testing.T) {
	t.Parallel()
	key, value := []byte("user:42"), pattern(50, 3)
	other := []byte("user:43")
	le := binary.LittleEndian
	tests := []struct {
		name string
		// mutate returns the bytes, key and slot to verify.
		mutate func(rec []byte, s Slot) ([]byte, []byte, Slot)
		want   error
	}{
		{"other key", func(rec []byte, s Slot) ([]byte, []byte, Slot) { return rec, other, s }, ErrKeyMismatch},
		{"longer key", func(rec []byte, s Slot) ([]byte, []byte, Slot) { return rec, append(key, 'x'), s }, ErrKeyMismatch},
		{"dead", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			le.PutUint32(rec[recState:], stateDead)
			return rec, key, s
		}, ErrDead},
		{"state hidden (an atomic group in progress)", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			le.PutUint32(rec[recState:], stateHidden)
			return rec, key, s
		}, ErrHidden},
		{"state none of live, dead, hidden", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			le.PutUint32(rec[recState:], 3)
			return rec, key, s
		}, ErrTorn},
		{"value byte flipped", func(rec []byte, s Slot) ([]byte, []byte, Slot) { rec[60] ^= 0x10; return rec, key, s }, ErrTorn},
		{"key byte flipped", func(rec []byte, s Slot) ([]byte, []byte, Slot) { rec[24] ^= 1; return rec, key, s }, ErrTorn},
		{"create flipped", func(rec []byte, s Slot) ([]byte, []byte, Slot) { rec[9] ^= 1; return rec, key, s }, ErrTorn},
		{"lease flipped", func(rec []byte, s Slot) ([]byte, []byte, Slot) { rec[recMeta+31] ^= 1; return rec, key, s }, ErrTorn},
		{"crc flipped", func(rec []byte, s Slot) ([]byte, []byte, Slot) { rec[0] ^= 1; return rec, key, s }, ErrTorn},
		{"padding set", func(rec []byte, s Slot) ([]byte, []byte, Slot) { rec[len(rec)-1] = 1; return rec, key, s }, ErrTorn},
		{"padding set, crc fixed up", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			rec[len(rec)-1] = 1
			le.PutUint32(rec, crc32.Checksum(rec[8:], castagnoli))
			return rec, key, s
		}, ErrTorn},
		{"reserved set, crc fixed up", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			le.PutUint16(rec[recReserved:], 1)
			le.PutUint32(rec, crc32.Checksum(rec[8:], castagnoli))
			return rec, key, s
		}, ErrTorn},
		{"zeroed", func(rec []byte, s Slot) ([]byte, []byte, Slot) { clear(rec); return rec, key, s }, ErrBadLength},
		{"read shorter than slot", func(rec []byte, s Slot) ([]byte, []byte, Slot) { return rec[:len(rec)-8], key, s }, ErrBadLength},
		{"slot longer than record", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			s.Len += 8
			return append(rec, make([]byte, 8)...), key, s
		}, ErrBadLength},
		{"value length field changed", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			le.PutUint32(rec[recValueLen:], 56) // same padded length: crc catches it
			return rec, key, s
		}, ErrTorn},
		{"value length field beyond slot", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			le.PutUint32(rec[recValueLen:], 500)
			return rec, key, s
		}, ErrBadLength},
		{"key length zero", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			le.PutUint16(rec[recKeyLen:], 0)
			return rec, key, s
		}, ErrBadLength},
		{"below minimum", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			return rec[:24], key, Slot{Offset: s.Offset, Len: 24}
		}, ErrBadLength},
		{"torn: front of one record, back of another", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			rec2, _ := makeRecord(key, pattern(50, 9), 8, s.Offset)
			copy(rec[40:], rec2[40:])
			return rec, key, s
		}, ErrTorn},
		{"torn: newer header over older body", func(rec []byte, s Slot) ([]byte, []byte, Slot) {
			rec2, _ := makeRecord(key, pattern(50, 9), 8, s.Offset)
			copy(rec[:24], rec2[:24])
			return rec, key, s
		}, ErrTorn},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, s := makeRecord(key, value, 7, 1024)
			b, k, s := tc.mutate(rec, s)
			v, ver, err := VerifyRecord(b, k, s)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if v != nil || ver != (revision.Meta{}) {
				t.Fatalf("rejected record still returned value %q version %d", v, ver)
			}
		})
	}
}
