package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"runtime"
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
		if len(b) == 0 || !slices.IsSortedFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) }) {
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

// TestDecodeMembersBoundsAllocation: the member count in a snapshot's Data
// (a peer's MsgSnap, checked by raft's filter before anything else) is not
// trusted to size an allocation beyond what the bytes can hold. Every
// member takes at least 3 bytes (id, record length, learner flag), but
// DecodeMembers allowed a count up to the input's length and allocated 32
// bytes (a Member) for each before decoding the first: a 1 MiB snapshot
// message that claims 1 Mi members cost 32 MiB to refuse (128 MiB for a
// 4 MiB peer message, the transport's default limit).
func TestDecodeMembersBoundsAllocation(t *testing.T) {
	const size = 1 << 20
	// A count the input's length allows, and one its bytes could hold.
	for _, count := range []uint64{size - 4, (size - 4) / 3} {
		b := binary.AppendUvarint(nil, count)
		b = append(b, make([]byte, size-len(b))...) // member 0: a record of 0 bytes
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := DecodeMembers(b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeMembers of %d claimed members: %v, want ErrCorrupt", count, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(b)) {
			t.Errorf("refusing a %d KiB list claiming %d members allocated %d KiB; want at most the input's size",
				len(b)>>10, count, alloc>>10)
		}
	}
}
