package store

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
)

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
