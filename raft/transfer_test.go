package raft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft/peer"
	"github.com/kvd-project/kvd/transport"
)

// Frames of a snapshot transfer, as a peer would send them.

func beginFrame(id peer.TransferID) []byte { return peer.AppendSnapshotBegin(nil, id) }

// chunkFrame holds key/value pairs (alternating in kv), each at version.
func chunkFrame(id peer.TransferID, version uint64, kv ...string) []byte {
	f := peer.AppendSnapshotHeader(nil, peer.FrameSnapshotChunk, id)
	for i := 0; i+1 < len(kv); i += 2 {
		raw := binary.LittleEndian.AppendUint64(nil, version)
		f = peer.AppendChunkRecord(f, []byte(kv[i]), append(raw, kv[i+1]...))
	}
	return f
}

func endFrame(t *testing.T, id peer.TransferID, m *pb.Message) []byte {
	t.Helper()
	f, err := peer.AppendSnapshotEnd(nil, id, m)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var testMembers = []store.Member{{ID: 1, Addr: "a"}, {ID: 2, Addr: "b"}, {ID: 3, Addr: "c"}}

// snapMsg is node 2's MsgSnap to node 1 for the snapshot at index/term.
func snapMsg(index, term uint64) *pb.Message {
	return &pb.Message{
		Type: pb.MsgSnap.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(term),
		Snapshot: &pb.Snapshot{
			Data: store.EncodeMembers(testMembers),
			Metadata: &pb.SnapshotMetadata{
				ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}},
				Index:     new(index),
				Term:      new(term),
			},
		},
	}
}

// reader is a reader of frames from member from's session to n, as the
// peer layer runs one per session.
func reader(t *testing.T, n *Node, from uint64) *peer.Reader {
	t.Helper()
	r := n.peers.(*peer.Set).NewReader(from)
	t.Cleanup(r.Close)
	return r
}

func handleAll(t *testing.T, r *peer.Reader, frames ...[]byte) {
	t.Helper()
	for i, f := range frames {
		if err := r.Handle(f); err != nil {
			t.Fatalf("frame %d (%q): %v; the connection would drop", i, f[0], err)
		}
	}
}

// openNode1 opens node 1 of a three-member cluster from cfg (testConfig
// plus what the test sets), on a memory network nothing else is on, and
// closes it when the test ends.
func openNode1(t *testing.T, cfg Config) *Node {
	t.Helper()
	cfg.ID, cfg.DataDir, cfg.Transport = 1, t.TempDir(), newMemNet().endpoint("a")
	cfg.InitialCluster = map[uint64]string{1: "a", 2: "b", 3: "c"}
	if cfg.StateMachine == nil {
		cfg = withKV(cfg, nil)
	}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// TestInterleavedSnapshotTransfers replays the wire order of two transfers
// to one follower mixed up (an older stream still sending while a newer one
// runs) into a real node, and checks it installs exactly the newer
// snapshot: no stray data of the older transfer lands in it.
func TestInterleavedSnapshotTransfers(t *testing.T) {
	cfg := testConfig()
	app := newApplierLog()
	cfg = withKV(cfg, app)
	n := openNode1(t, cfg)
	app.node.Store(n)

	s1 := peer.TransferID{Index: 100, Term: 4, Nonce: 0x1111}
	s2 := peer.TransferID{Index: 200, Term: 5, Nonce: 0x2222}
	r := reader(t, n, 2)
	handleAll(t, r,
		beginFrame(s1),
		chunkFrame(s1, 90, "a", "old-a", "gone", "deleted before 200"),
		beginFrame(s2),
		chunkFrame(s2, 150, "a", "new-a"),
		chunkFrame(s1, 95, "gone", "resurrected", "zombie", "x"), // stray chunk of S1
		chunkFrame(s2, 190, "b", "new-b"),
		endFrame(t, s1, snapMsg(100, 4)),                                                  // stray end of S1
		endFrame(t, peer.TransferID{Index: 200, Term: 5, Nonce: 0x3333}, snapMsg(200, 5)), // right snapshot, wrong transfer
		endFrame(t, s2, snapMsg(200, 5)),
		chunkFrame(s2, 199, "late", "x"), // after the end: no transfer staged
	)
	waitFor(t, "the snapshot at 200 to be installed", func() bool { return n.Status().Applied == 200 })
	want := map[string]versioned{"a": {"new-a", 150}, "b": {"new-b", 190}}
	if got := kvState(t, n); !maps.Equal(got, want) {
		t.Fatalf("installed state %v, want exactly snapshot 200's %v", got, want)
	}
	waitFor(t, "the applier to restore", func() bool { _, restores, _ := app.snapshot(); return restores > 0 })
	if mirror, _, _ := app.snapshot(); !maps.Equal(mirror, want) {
		t.Fatalf("applier mirror %v, want %v", mirror, want)
	}
}

// TestStaleSnapshotReportsIgnored checks that the loop passes raft only the
// outcome of the latest transfer to each peer.
func TestStaleSnapshotReportsIgnored(t *testing.T) {
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1,
		Storage: etcdraft.NewMemoryStorage(), MaxInflightMsgs: 16, Logger: raftLogger{testLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	l := &loop{n: &Node{log: testLogger()}, rn: rn, sm: nopSM{}, snapPending: map[uint64]uint64{2: 5}}
	l.report(report{to: 2, kind: reportSnapshotFailed, seq: 4})
	if l.snapPending[2] != 5 {
		t.Fatal("a superseded transfer's outcome was taken for the latest's")
	}
	l.report(report{to: 2, kind: reportSnapshotDone, seq: 5})
	if _, ok := l.snapPending[2]; ok {
		t.Fatal("the latest transfer's outcome was not passed on")
	}
}

// TestMessageLimitChecked checks that a peer connection whose MaxMessage
// cannot carry raft's largest message is refused, with an error saying so,
// rather than made to drop that message forever (the peer layer refuses it
// on both sides: raft/peer's TestMessageLimitRefused).
func TestMessageLimitChecked(t *testing.T) {
	cfg := testConfig().withDefaults()
	need := cfg.maxPeerMessage()
	if need <= limits.MaxValue+limits.MaxKey || need > transport.DefaultMaxMessage {
		t.Fatalf("maxPeerMessage %d: must fit a max-size value and the default transport limit", need)
	}
	big := cfg
	big.MaxSizePerMsg = 2 << 20 // the largest Validate accepts
	if m := big.maxPeerMessage(); m < 3<<20 || m > transport.DefaultMaxMessage {
		t.Fatalf("maxPeerMessage with MaxSizePerMsg 2 MiB = %d", m)
	}

	n := openNode1(t, cfg)
	err := n.checkMessageLimit(&limitConn{max: 1 << 20})
	if !errors.Is(err, ErrConfig) || !errors.Is(err, transport.ErrMessageTooLarge) {
		t.Fatalf("a 1 MiB connection: err = %v", err)
	}
	t.Log(err)
	c := &limitConn{max: 1 << 20}
	n.ServePeer(c, peer.AppendHello(nil, peer.Hello{From: 2, Cluster: n.ClusterID(), Addr: "b"}))
	if c.recvs != 0 || !c.closed {
		t.Fatalf("ServePeer on a 1 MiB connection: %d Recv calls, closed %v", c.recvs, c.closed)
	}

	// A big enough limit passes.
	if err := n.checkMessageLimit(&limitConn{max: need}); err != nil {
		t.Fatal(err)
	}
}

type limitConn struct {
	transport.Conn
	max    int
	recvs  int
	closed bool
}

func (c *limitConn) MaxMessage() int    { return c.max }
func (c *limitConn) RemoteAddr() string { return "b" }
func (c *limitConn) Close() error       { c.closed = true; return nil }
func (c *limitConn) Recv(context.Context, []byte) ([]byte, error) {
	c.recvs++
	return nil, transport.ErrClosed
}

// TestCloseDiscardsQueuedSnapshot checks that a staged snapshot a peer
// session delivers while Close runs, after the loop exited, is deleted by
// Close.
func TestCloseDiscardsQueuedSnapshot(t *testing.T) {
	cfg := testConfig()
	cfg.ID, cfg.DataDir, cfg.Transport = 1, t.TempDir(), newMemNet().endpoint("a")
	cfg.InitialCluster = map[uint64]string{1: "a", 2: "b"}
	n, err := Open(withKV(cfg, nil))
	if err != nil {
		t.Fatal(err)
	}
	id := peer.TransferID{Index: 50, Term: 3, Nonce: 1}
	conn := &gateConn{release: make(chan struct{}),
		frames: [][]byte{beginFrame(id), chunkFrame(id, 1, "orphan", "x"), endFrame(t, id, snapMsg(50, 3))}}
	served := make(chan struct{})
	go func() {
		defer close(served)
		n.ServePeer(conn, peer.AppendHello(nil, peer.Hello{From: 2, Cluster: n.ClusterID(), Addr: "b"}))
	}()
	waitFor(t, "the session to be served", func() bool { return slices.Contains(n.peers.Known(), 2) })
	closed := make(chan error)
	go func() { closed <- n.Close() }()
	<-n.donec
	close(conn.release) // the session delivers the transfer now
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	<-served
	if conn.next != len(conn.frames) {
		t.Fatalf("the session took %d of the %d frames", conn.next, len(conn.frames))
	}

	db, err := pebble.Open(cfg.DataDir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte("k"), UpperBound: []byte("l")})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.HasSuffix(it.Key(), []byte("orphan")) {
			t.Fatalf("staged data left behind: %q", it.Key())
		}
	}
}

// gateConn is a served peer connection whose frames arrive only once
// release is closed; then it fails.
type gateConn struct {
	transport.Conn
	release chan struct{}
	frames  [][]byte
	next    int
}

func (c *gateConn) Recv(context.Context, []byte) ([]byte, error) {
	<-c.release
	if c.next == len(c.frames) {
		return nil, transport.ErrClosed
	}
	c.next++
	return c.frames[c.next-1], nil
}
func (c *gateConn) MaxMessage() int    { return transport.DefaultMaxMessage }
func (c *gateConn) RemoteAddr() string { return "b" }
func (c *gateConn) Close() error       { return nil }

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
