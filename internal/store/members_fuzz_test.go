package store

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// FuzzDecodeMembers: a snapshot's member list (a peer's MsgSnap Data)
// decodes or fails with ErrCorrupt, never panics, and a list in id order
// re-encodes to the same bytes.
func FuzzDecodeMembers(f *testing.F) {
	f.Add(EncodeMembers([]Member{{ID: 1, Addr: "a:1"}, {ID: 2, Addr: "b:2", IsLearner: true}}))
	f.Add(EncodeMembers([]Member{{ID: 1, Addr: "a:1"}, {ID: 5, Removed: true}}))
	f.Add([]byte{0})
	f.Add([]byte{0xff, 0xff, 0x03, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := DecodeMembers(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if len(b) == 0 || !slices.IsSortedFunc(ms, func(a, b Member) int { return cmpU64(a.ID, b.ID) }) {
			return
		}
		if out := EncodeMembers(ms); !bytes.Equal(out, b) && canonical(b) {
			t.Fatalf("re-encodes differently:\n%x\n%x", out, b)
		}
	})
}

// canonical reports whether b's uvarints could be EncodeMembers' own (a
// uvarint padded with a final 0x00 byte, 0x82 0x00 for 2, decodes but is
// not; the check is conservative: any such byte pair skips the input).
func canonical(b []byte) bool {
	for i := 0; i+1 < len(b); i++ {
		if b[i]&0x80 != 0 && b[i+1] == 0 {
			return false
		}
	}
	return true
}
