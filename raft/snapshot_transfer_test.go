package raft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft/peer"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// Frames of a snapshot transfer, as a peer would send them.

func beginFrame(id peer.TransferID) []byte { return peer.AppendSnapshotBegin(nil, id) }

// chunkFrame holds key/value pairs (alternating in kv), each written
// at version, as history records.
func chunkFrame(id peer.TransferID, version uint64, kv ...string) []byte {
	f := peer.AppendSnapshotHeader(nil, peer.FrameSnapshotChunk, id)
	for i := 0; i+1 < len(kv); i += 2 {
		m := revision.Meta{Create: version, Mod: version, Version: 1}
		k := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, version), uint32(i/2))
		f = peer.AppendChunkRecord(f, append(k, kv[i]...), append(m.Append([]byte{0}), kv[i+1]...))
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
	app.setNode(n)

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
		endFrame(t, s1, peertest.Snap(100, 4)),                                                  // stray end of S1
		endFrame(t, peer.TransferID{Index: 200, Term: 5, Nonce: 0x3333}, peertest.Snap(200, 5)), // right snapshot, wrong transfer
		endFrame(t, s2, peertest.Snap(200, 5)),
		chunkFrame(s2, 199, "late", "x"), // after the end: no transfer staged
	)
	wait.For(t, "the snapshot at 200 to be installed", func() bool { return n.Status().Applied == 200 })
	want := map[string]versioned{"a": {"new-a", 150}, "b": {"new-b", 190}}
	if got := kvState(t, n); !maps.Equal(got, want) {
		t.Fatalf("installed state %v, want exactly snapshot 200's %v", got, want)
	}
	wait.For(t, "the applier to restore", func() bool { _, restores, _ := app.snapshot(); return restores > 0 })
	if mirror, _, _ := app.snapshot(); !maps.Equal(mirror, want) {
		t.Fatalf("applier mirror %v, want %v", mirror, want)
	}
}

// TestStaleSnapshotReportsIgnored checks that the loop passes raft only the
// outcome of the latest transfer to each peer.
func TestStaleSnapshotReportsIgnored(t *testing.T) {
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1,
		Storage: etcdraft.NewMemoryStorage(), MaxInflightMsgs: 16, Logger: raftLogger{peertest.Logger()}})
	if err != nil {
		t.Fatal(err)
	}
	l := &loop{n: &Node{log: peertest.Logger()}, rn: rn, sm: nopSM{}, snapPending: map[uint64]uint64{2: 5}}
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
	n.ServePeer(c, peer.AppendHello(nil, peer.Hello{From: 2, Cluster: n.ClusterID(), Addr: "b", Format: store.DataFormat}))
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
		frames: [][]byte{beginFrame(id), chunkFrame(id, 1, "orphan", "x"), endFrame(t, id, peertest.Snap(50, 3))}}
	served := make(chan struct{})
	go func() {
		defer close(served)
		n.ServePeer(conn, peer.AppendHello(nil, peer.Hello{From: 2, Cluster: n.ClusterID(), Addr: "b", Format: store.DataFormat}))
	}()
	wait.For(t, "the session to be served", func() bool { return slices.Contains(n.peers.Known(), 2) })
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

// TestStaleTermSnapshotDataNotInstalled: in one loop iteration node 1
// steps the MsgSnap of the leader of term 5 for snapshot 200/4 (raft takes
// it) and then one for the same snapshot from node 3 at the stale term 4
// (raft ignores it). The data installed is the leader's: staged data
// picked by index and term alone, the last match winning, would install
// the stale peer's under the leader's MsgSnap.
func TestStaleTermSnapshotDataNotInstalled(t *testing.T) {
	n := openNode1(t, testConfig())
	thaw := make(chan struct{})
	if err := n.freeze(time.Hour, thaw); err != nil {
		t.Fatal(err)
	}
	// The leader of term 5 (node 2).
	good := peer.TransferID{Index: 200, Term: 4, Nonce: 1}
	m := peertest.Snap(200, 4)
	m.Term = new(uint64(5))
	handleAll(t, reader(t, n, 2), beginFrame(good), chunkFrame(good, 150, "a", "leader's"), endFrame(t, good, m))
	// A node that is not the leader, at an older term (node 3, term 4).
	stale := peer.TransferID{Index: 200, Term: 4, Nonce: 2}
	m3 := peertest.Snap(200, 4)
	m3.From, m3.Term = new(uint64(3)), new(uint64(4))
	handleAll(t, reader(t, n, 3), beginFrame(stale), chunkFrame(stale, 150, "a", "stale peer's"), endFrame(t, stale, m3))
	close(thaw)

	wait.For(t, "the snapshot at 200 to be installed", func() bool { return n.Status().Applied == 200 })
	if st := n.Status(); st.Term != 5 || st.LeaderID != 2 {
		t.Fatalf("status %+v: want term 5 led by 2", st)
	}
	want := map[string]versioned{"a": {"leader's", 150}}
	if got := kvState(t, n); !maps.Equal(got, want) {
		t.Fatalf("installed %v; want the data of the MsgSnap raft accepted, %v", got, want)
	}
}

// TestSnapshotStagingBoundedAcrossSessions: Config.MaxSnapshotBytes is
// documented as what keeps a member session from filling the node's disk
// ("Without it a peer session could fill the disk"; docs/security.md: one
// "cannot crash a node or fill its disk"). But the bound is kept per
// session: the same member may open any number of sessions (up to the
// listener's MaxConns), and each stages its own transfer of up to
// MaxSnapshotBytes at once. Here 16 sessions of one member each stage
// 800 KiB of a 1 MiB-bounded transfer and keep it: the node holds about 16
// times the bound (in Pebble batches here; on disk past 4 MiB a session).
// TestSnapshotStagingBoundedAcrossSessions: MaxSnapshotBytes bounds one
// session's transfer, and one member opening many sessions must not stage
// that much on each, or 16 sessions would stage 16 times the bound.
func TestSnapshotStagingBoundedAcrossSessions(t *testing.T) {
	const (
		sessions = 16
		frames   = 8
		value    = 100 << 10 // each frame > the transport's keepMsgBuf, so its buffer is not kept
	)
	cfg := testConfig()
	cfg.TickInterval = 50 * time.Millisecond
	cfg.MaxSnapshotBytes = 1 << 20
	c := newClusterOn(t, newTCPNet(), 3, cfg)
	c.leader()
	target := c.nodes[1]
	h := peer.Hello{From: 2, Cluster: target.node.ClusterID(), Format: store.DataFormat}
	attacker, err := tcp.New(tcp.Config{Node: "attacker"})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	heap := func() int64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	v := strings.Repeat("v", value)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := heap()
	for i := range sessions {
		conn := rawPeer(t, attacker, target.addr, h)
		id := peer.TransferID{Index: 1 << 30, Term: 1, Nonce: uint64(i + 1)}
		err := conn.Send(ctx, beginFrame(id))
		for j := 0; err == nil && j < frames; j++ {
			err = conn.Send(ctx, chunkFrame(id, 1, string(rune('a'+j)), v))
		}
		// A session the node refused is closed: its sends fail.
	}
	time.Sleep(500 * time.Millisecond) // the sessions handle what they were sent
	// Each transfer is within MaxSnapshotBytes; together they pass twice it.
	if got := droppedCount(t, target.node, peer.DropSnapTooBig); got == 0 {
		t.Errorf("no transfer refused: %d sessions staged %d KiB each against a node-wide bound of %d KiB",
			sessions, frames*value>>10, 2*cfg.MaxSnapshotBytes>>10)
	}
	if got := target.node.peers.(*peer.Set).Staged(); got > 2*int64(cfg.MaxSnapshotBytes) {
		t.Errorf("%d bytes staged, past twice MaxSnapshotBytes", got)
	}
	grown := heap() - base
	t.Logf("%d sessions of member 2, each staging %d KiB of a transfer bounded at %d KiB: node heap grew %d KiB",
		sessions, frames*value>>10, cfg.MaxSnapshotBytes>>10, grown>>10)
	if limit := 2*int64(cfg.MaxSnapshotBytes) + sessions*(64<<10) + 2<<20; grown > limit {
		t.Errorf("one member's sessions stage %d KiB at once; want at most twice MaxSnapshotBytes (%d KiB) plus what idle sessions cost (limit %d KiB)",
			grown>>10, cfg.MaxSnapshotBytes>>10, limit>>10)
	}
}

// TestStagingBoundCountsDeliveredTransfers: a finished transfer stays
// counted against the node-wide bound until the loop installs or discards
// it. Were it counted only until its 'S' frame, it would be forgotten
// while it waited for the loop (busy with an fsync, or here frozen), and
// one session could queue transfer after transfer, each charged from zero:
// 8 of 900 KiB against a bound of 2 MiB. Once the loop runs again, the count
// must fall back to zero: none of it leaks.
func TestStagingBoundCountsDeliveredTransfers(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSnapshotBytes = 1 << 20
	n := openNode1(t, cfg)
	thaw := make(chan struct{})
	if err := n.freeze(time.Hour, thaw); err != nil {
		t.Fatal(err)
	}
	r := reader(t, n, 2)
	value := strings.Repeat("v", 100<<10)
	const transfers, frames = 8, 9 // ~900 KiB each, under MaxSnapshotBytes
	var held int64
	refused := false
	for i := 0; i < transfers && !refused; i++ {
		id := peer.TransferID{Index: uint64(100 + i), Term: 4, Nonce: uint64(i + 1)}
		if err := r.Handle(beginFrame(id)); err != nil {
			t.Fatal(err)
		}
		for j := range frames {
			f := chunkFrame(id, 1, string(rune('a'+j)), value)
			if err := r.Handle(f); err != nil {
				refused = true // the bound held: the session ends
				break
			}
			held += int64(len(f) - peer.SnapshotHeaderLen)
		}
		if !refused {
			if err := r.Handle(endFrame(t, id, peertest.Snap(uint64(100+i), 4))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if limit := 2 * int64(cfg.MaxSnapshotBytes); !refused || held > limit {
		t.Fatalf("one session staged %d KiB in finished transfers against a node-wide bound of %d KiB (refused: %v)",
			held>>10, limit>>10, refused)
	}
	if droppedCount(t, n, peer.DropSnapTooBig) != 1 {
		t.Fatal("the peer.Refusal was not counted")
	}
	close(thaw)
	wait.For(t, "the staged transfers installed or discarded, and uncounted", func() bool { return n.peers.(*peer.Set).Staged() == 0 })
}

// TestSnapshotCatchUp compacts the log while a follower is down, so it can
// only catch up from a snapshot streamed in many small chunks.
func TestSnapshotCatchUp(t *testing.T) {
	forNetworks(t, func(t *testing.T, nw network) {
		cfg := testConfig()
		cfg.SnapshotCount, cfg.SnapshotCatchUpEntries, cfg.SnapshotChunkSize = 20, 5, 512
		c := newClusterOn(t, nw, 3, cfg)
		lead := c.leader()
		down := c.follower(lead)
		c.put("before", "1")
		c.caughtUp(down)
		c.stop(down.id)
		lead = c.leader()

		for i := range 150 {
			c.put(fmt.Sprintf("key%03d", i), fmt.Sprintf("value-%d-%s", i, make([]byte, 40)))
		}
		c.del("before")
		lead = c.leader()
		first, _ := lead.node.store.FirstIndex()
		down2 := c.start(down.id, false)
		if applied := down2.node.Status().Applied; first <= applied+1 {
			t.Fatalf("leader's log starts at %d, follower applied %d: no snapshot needed", first, applied)
		}
		c.caughtUp(down2)
		wait.For(t, "follower state to match", func() bool {
			return maps.Equal(kvState(t, down2.node), kvState(t, lead.node))
		})
		if _, restores, _ := down2.app.snapshot(); restores == 0 {
			t.Error("follower caught up without installing a snapshot")
		}
		checkMirror(t, down2)

		// The installed state survives a restart, and so does replication.
		c.stop(down2.id)
		down3 := c.start(down2.id, false)
		c.put("after", "2")
		c.caughtUp(down3)
		wait.For(t, "restarted follower state to match", func() bool {
			return maps.Equal(kvState(t, down3.node), kvState(t, c.leader().node))
		})
	})
}
