package peer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/store"
)

// FuzzPeerFrames feeds arbitrary bytes to every decoder a peer connection
// uses: none may panic, and whatever decodes must re-encode to the same
// bytes.
func FuzzPeerFrames(f *testing.F) {
	id := TransferID{Index: 7, Term: 2, Nonce: 99}
	f.Add(AppendHello(nil, Hello{From: 1, Cluster: 2, Addr: "127.0.0.1:1", Format: store.DataFormat}))
	f.Add(AppendSnapshotBegin(nil, id))
	f.Add(AppendChunkRecord(AppendSnapshotHeader(nil, FrameSnapshotChunk, id), []byte("k"), []byte("raw")))
	f.Add(AppendChunkRecord(AppendSnapshotHeader(nil, FrameSnapshotLease, id), []byte("l\x00\x00\x00\x00\x00\x00\x00\x07"), make([]byte, 16)))
	f.Add(AppendChunkRecord(AppendSnapshotHeader(nil, FrameSnapshotRevision, id), []byte("s"), make([]byte, 8)))
	if b, err := AppendSnapshotEnd(nil, id, &pb.Message{Type: pb.MsgSnap.Enum()}); err == nil {
		f.Add(b)
	}
	f.Add([]byte{FrameMessage, 0x08, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := parseHello(b); err == nil {
			if out := AppendHello(nil, h); !bytes.Equal(out, b) {
				t.Fatalf("hello re-encodes differently")
			}
		}
		if len(b) == 0 {
			return
		}
		if id, body, err := parseSnapshotFrame(b); err == nil {
			if out := append(AppendSnapshotHeader(nil, b[0], id), body...); !bytes.Equal(out, b) {
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

// fuzzSet is node 1's peer layer (of members 1, 2 and 3) over st, whose
// cluster id is cluster (0: a joining node that has not learned it).
func fuzzSet(tb testing.TB, st *store.Store, cluster uint64) *Set {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	ps, err := New(ctx, Config{ID: 1, Addr: "a", ClusterID: cluster, Transport: dialer{}, Store: st, Host: newFakeHost(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return ps
}

// FuzzPeerHello feeds arbitrary hellos to the session check of a node of
// cluster 42 and of a joining node: it must not panic, and a session it
// admits must come from another node and carry the node's (possibly just
// learned) cluster id; a joining node learns only from its members.
func FuzzPeerHello(f *testing.F) {
	f.Add(AppendHello(nil, Hello{From: 2, Cluster: 42, Addr: "b", Format: store.DataFormat}), false)
	f.Add(AppendHello(nil, Hello{From: 2, Addr: "b", Format: store.DataFormat}), false)
	f.Add(AppendHello(nil, Hello{From: 1, Cluster: 42, Format: store.DataFormat}), false)
	f.Add(AppendHello(nil, Hello{From: 99, Cluster: 42, Format: store.DataFormat}), true)
	f.Add(AppendHello(nil, Hello{From: 3, Cluster: 7, Format: store.DataFormat}), true)
	f.Add(append(AppendHello(nil, Hello{From: 2, Cluster: 42}), bytes.Repeat([]byte("x"), 300)...), false)
	f.Add(AppendHello(nil, Hello{From: 2, Cluster: 42, Addr: "b"}), false)                 // the previous build's
	f.Add(AppendHello(nil, Hello{From: 2, Cluster: 42, Addr: "b", Format: 0x0300}), false) // a newer one's
	st := openStore(f)
	f.Fuzz(func(t *testing.T, b []byte, joining bool) {
		cluster := uint64(42)
		if joining {
			cluster = 0
		}
		ps := fuzzSet(t, st, cluster)
		h, why, err := ps.admitHello(b)
		if err != nil {
			if why == "" || !errors.Is(err, ErrRefused) {
				t.Fatalf("refused with reason %q and error %v", why, err)
			}
			return
		}
		if ours := ps.ClusterID(); h.Cluster != ours || ours == 0 || h.From == ps.cfg.ID || h.From == 0 {
			t.Fatalf("admitted hello from %d of cluster %x; node %d of cluster %x", h.From, h.Cluster, ps.cfg.ID, ours)
		}
		if joining && !ps.host.IsMember(h.From) {
			t.Fatalf("joining node learned its cluster from non-member %d", h.From)
		}
	})
}
