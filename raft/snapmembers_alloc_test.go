package raft

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/kvd-project/kvd/internal/store"
)

// TestPeerSnapshotMemberListBoundsAllocation: a peer's snapshot transfer
// ('B', then 'S' with a MsgSnap whose Data claims a huge member list) is
// refused without allocating many times the frame: the filter decodes the
// member list (checkSnapshot), which sized its slice by the claimed count
// (up to the data's length, 32 bytes a member) before decoding any.
func TestPeerSnapshotMemberListBoundsAllocation(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := fuzzNode(t, st, 42)
	r := &peerReader{n: n, from: 2}
	defer r.discard()
	const size = 1 << 20
	data := binary.AppendUvarint(nil, size-4)
	data = append(data, make([]byte, size-len(data))...)
	m := snapMsg(10, 2)
	m.Snapshot.Data = data
	id := transferID{index: 10, term: 2, nonce: 1}
	end, err := appendSnapshotEnd(nil, id, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.handle(appendSnapshotBegin(nil, id)); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_ = r.handle(end) // dropped as malformed; the session may stay
	runtime.ReadMemStats(&after)
	if len(n.recvc) != 0 {
		t.Fatal("a snapshot with an undecodable member list reached the loop")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*uint64(len(end)) {
		t.Fatalf("refusing a %d KiB snapshot frame allocated %d KiB", len(end)>>10, alloc>>10)
	}
}
