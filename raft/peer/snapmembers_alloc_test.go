package peer

import (
	"encoding/binary"
	"runtime"
	"testing"
)

// TestPeerSnapshotMemberListBoundsAllocation: a peer's snapshot transfer
// ('B', then 'S' with a MsgSnap whose Data claims a huge member list) is
// refused without allocating many times the frame: the filter decodes the
// member list (checkSnapshot), which sized its slice by the claimed count
// (up to the data's length, 32 bytes a member) before decoding any.
func TestPeerSnapshotMemberListBoundsAllocation(t *testing.T) {
	h := newFakeHost()
	r := testSet(t, Config{}, h).NewReader(2)
	defer r.Close()
	const size = 1 << 20
	data := binary.AppendUvarint(nil, size-4)
	data = append(data, make([]byte, size-len(data))...)
	m := snapMsg(10, 2)
	m.Snapshot.Data = data
	id := TransferID{Index: 10, Term: 2, Nonce: 1}
	end, err := AppendSnapshotEnd(nil, id, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Handle(AppendSnapshotBegin(nil, id)); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_ = r.Handle(end) // dropped as malformed; the session may stay
	runtime.ReadMemStats(&after)
	if len(h.recv) != 0 {
		t.Fatal("a snapshot with an undecodable member list reached the loop")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*uint64(len(end)) {
		t.Fatalf("refusing a %d KiB snapshot frame allocated %d KiB", len(end)>>10, alloc>>10)
	}
}
