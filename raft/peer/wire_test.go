package peer

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
)

func TestPeerHello(t *testing.T) {
	h := Hello{From: 3, Cluster: 42, Addr: "host:1"}
	b := AppendHello(nil, h)
	if !IsHello(b) {
		t.Fatal("own hello not recognised")
	}
	if got, err := parseHello(b); err != nil || got != h {
		t.Fatalf("parseHello = %+v, %v", got, err)
	}
	for _, notHello := range [][]byte{nil, []byte("KVDPEER1"), []byte("GET key please, this is a client"), b[:helloHeader-1]} {
		if IsHello(notHello) {
			t.Errorf("IsHello(%q) = true", notHello)
		}
	}
}

// TestPeerHelloClientAddr: a node with a peer listener announces its
// client address after its peer address; a node with one address sends
// the hello of old, which nodes of every version parse alike.
func TestPeerHelloClientAddr(t *testing.T) {
	for _, h := range []Hello{
		{From: 3, Cluster: 42, Addr: "host:1", ClientAddr: "host:2"},
		{From: 3, Cluster: 42, Addr: "host:1"},
	} {
		b := AppendHello(nil, h)
		if got, err := parseHello(b); err != nil || got != h {
			t.Errorf("parseHello(AppendHello(%+v)) = %+v, %v", h, got, err)
		}
	}
	same := AppendHello(nil, Hello{From: 3, Cluster: 42, Addr: "host:1", ClientAddr: "host:1"})
	if want := AppendHello(nil, Hello{From: 3, Cluster: 42, Addr: "host:1"}); string(same) != string(want) {
		t.Errorf("a client address equal to the peer address is sent: %q, want %q", same, want)
	}
}

func TestSnapshotFrames(t *testing.T) {
	want := TransferID{Index: 77, Term: 5, Nonce: 1<<63 + 9}
	id, err := parseSnapshotBegin(AppendSnapshotBegin(nil, want))
	if id != want || err != nil {
		t.Fatalf("begin frame: %v %v", id, err)
	}
	for _, bad := range [][]byte{{FrameSnapshotBegin}, AppendSnapshotBegin(nil, want)[:24], append(AppendSnapshotBegin(nil, want), 0)} {
		if _, err := parseSnapshotBegin(bad); err == nil {
			t.Errorf("begin frame of %d bytes accepted", len(bad))
		}
	}
	m := &pb.Message{Type: pb.MsgSnap.Enum(), To: new(uint64(2)), Snapshot: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(77))}}}
	end, err := AppendSnapshotEnd(nil, want, m)
	if err != nil || end[0] != FrameSnapshotEnd {
		t.Fatalf("end frame: %q, %v", end, err)
	}
	id, body, err := parseSnapshotFrame(end)
	got := &pb.Message{}
	if err != nil || id != want || proto.Unmarshal(body, got) != nil || !proto.Equal(got, m) {
		t.Fatalf("end frame parsed as %v, %v, %v", id, got, err)
	}
	pairs := [][2]string{{"a", "12345678"}, {"key-two", "87654321value"}, {string(make([]byte, 300)), "xxxxxxxx"}}
	chunk := AppendSnapshotHeader(nil, FrameSnapshotChunk, want)
	for _, p := range pairs {
		before := len(chunk)
		chunk = AppendChunkRecord(chunk, []byte(p[0]), []byte(p[1]))
		if len(chunk)-before != chunkRecordSize([]byte(p[0]), []byte(p[1])) {
			t.Fatalf("chunkRecordSize disagrees with the encoding")
		}
	}
	id, body, err = parseSnapshotFrame(chunk)
	if err != nil || id != want {
		t.Fatalf("chunk frame id %v, %v", id, err)
	}
	var decoded [][2]string
	err = forEachChunkRecord(body, func(k, v []byte) error {
		decoded = append(decoded, [2]string{string(k), string(v)})
		return nil
	})
	if err != nil || fmt.Sprint(decoded) != fmt.Sprint(pairs) {
		t.Fatalf("decoded %v, %v", decoded, err)
	}
	if err := forEachChunkRecord(body[:len(body)-1], func(k, v []byte) error { return nil }); err == nil {
		t.Fatal("truncated chunk accepted")
	}
}

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
	m := peertest.Snap(10, 2)
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
