package raft

import (
	"bytes"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// FuzzPeerFrames feeds arbitrary bytes to every decoder a peer connection
// uses: none may panic, and whatever decodes must re-encode to the same
// bytes.
func FuzzPeerFrames(f *testing.F) {
	id := transferID{index: 7, term: 2, nonce: 99}
	f.Add(appendHello(nil, hello{from: 1, cluster: 2, addr: "127.0.0.1:1"}))
	f.Add(appendSnapshotBegin(nil, id))
	f.Add(appendChunkRecord(appendSnapshotFrameHeader(nil, frameSnapshotChunk, id), []byte("k"), []byte("raw")))
	if b, err := appendSnapshotEnd(nil, id, &pb.Message{Type: pb.MsgSnap.Enum()}); err == nil {
		f.Add(b)
	}
	f.Add([]byte{frameMessage, 0x08, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := parseHello(b); err == nil {
			if out := appendHello(nil, h); !bytes.Equal(out, b) {
				t.Fatalf("hello re-encodes differently")
			}
		}
		if len(b) == 0 {
			return
		}
		if id, body, err := parseSnapshotFrame(b); err == nil {
			if out := append(appendSnapshotFrameHeader(nil, b[0], id), body...); !bytes.Equal(out, b) {
				t.Fatalf("snapshot frame re-encodes differently")
			}
			total := 0
			if forEachChunkRecord(body, func(k, raw []byte) error {
				total += len(k) + len(raw)
				return nil
			}) == nil && total > len(body) {
				t.Fatalf("chunk records claim %d bytes of a %d-byte body", total, len(body))
			}
		}
		_, _ = parseSnapshotBegin(b)
		m := &pb.Message{}
		_ = proto.Unmarshal(b[1:], m)
	})
}
