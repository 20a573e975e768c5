package raft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/raft/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// Frames of a snapshot transfer, as a peer would send them.

func beginFrame(id transferID) []byte { return appendSnapshotBegin(nil, id) }

// chunkFrame holds key/value pairs (alternating in kv), each at version.
func chunkFrame(id transferID, version uint64, kv ...string) []byte {
	f := appendSnapshotFrameHeader(nil, frameSnapshotChunk, id)
	for i := 0; i+1 < len(kv); i += 2 {
		raw := binary.LittleEndian.AppendUint64(nil, version)
		f = appendChunkRecord(f, []byte(kv[i]), append(raw, kv[i+1]...))
	}
	return f
}

func endFrame(t *testing.T, id transferID, m *pb.Message) []byte {
	t.Helper()
	f, err := appendSnapshotEnd(nil, id, m)
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

func handleAll(t *testing.T, r *peerReader, frames ...[]byte) {
	t.Helper()
	for i, f := range frames {
		if err := r.handle(f); err != nil {
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
	cfg.Applier = app
	n := openNode1(t, cfg)
	app.node.Store(n)

	s1 := transferID{index: 100, term: 4, nonce: 0x1111}
	s2 := transferID{index: 200, term: 5, nonce: 0x2222}
	r := &peerReader{n: n, from: 2}
	handleAll(t, r,
		beginFrame(s1),
		chunkFrame(s1, 90, "a", "old-a", "gone", "deleted before 200"),
		beginFrame(s2),
		chunkFrame(s2, 150, "a", "new-a"),
		chunkFrame(s1, 95, "gone", "resurrected", "zombie", "x"), // stray chunk of S1
		chunkFrame(s2, 190, "b", "new-b"),
		endFrame(t, s1, snapMsg(100, 4)),                         // stray end of S1
		endFrame(t, transferID{200, 5, 0x3333}, snapMsg(200, 5)), // right snapshot, wrong transfer
		endFrame(t, s2, snapMsg(200, 5)),
		chunkFrame(s2, 199, "late", "x"), // after the end: no transfer staged
	)
	if r.staged != nil {
		t.Fatal("data still staged after the transfer ended")
	}
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

// fakeNode is just enough of a Node for a peerReader or a peerSet.
func fakeNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg: cfg, id: 1, log: cfg.Logger, ctx: ctx, cancel: cancel,
		recvc: make(chan inbound, 16), reportc: make(chan report, 16), stopc: make(chan struct{}),
		addrs: map[uint64]string{1: "a", 2: "b"}, conns: map[transport.Conn]struct{}{},
	}
	n.peers = newPeerSet(n)
	t.Cleanup(func() {
		cancel()
		n.peers.close()
	})
	return n
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestPeerReaderRejectsForeignFrames checks the receiver keeps the
// connection but ignores snapshot frames of any transfer but the one it
// stages, and drops a transfer whose end names another snapshot.
func TestPeerReaderRejectsForeignFrames(t *testing.T) {
	n := fakeNode(t, testConfig())
	n.store = openStore(t)
	r := &peerReader{n: n, from: 2}
	none := func(what string) {
		t.Helper()
		select {
		case in := <-n.recvc:
			t.Fatalf("%s: delivered %v", what, in.msg.GetType())
		default:
		}
	}
	id1 := transferID{index: 10, term: 2, nonce: 1}
	id2 := transferID{index: 20, term: 3, nonce: 2}

	handleAll(t, r, chunkFrame(id1, 1, "k", "v"), endFrame(t, id1, snapMsg(10, 2)))
	none("frames without a transfer")
	handleAll(t, r, mustFrame(t, snapMsg(10, 2)))
	none("a MsgSnap outside a transfer")

	handleAll(t, r, beginFrame(id1), chunkFrame(id1, 1, "a", "1"), chunkFrame(id2, 1, "z", "9"), endFrame(t, id2, snapMsg(20, 3)))
	none("frames of another transfer")
	if r.staged == nil || r.xfer != id1 {
		t.Fatal("foreign frames disturbed the transfer being staged")
	}
	handleAll(t, r, endFrame(t, id1, snapMsg(20, 3)))
	none("an end naming another snapshot")
	if r.staged != nil {
		t.Fatal("a transfer ended by another snapshot's message was kept")
	}

	// A clean transfer still goes through, with exactly its data.
	id3 := transferID{index: 30, term: 3, nonce: 3}
	handleAll(t, r, beginFrame(id3), chunkFrame(id3, 7, "k1", "v1"), chunkFrame(id1, 1, "stray", "x"),
		chunkFrame(id3, 8, "k2", "v2"), endFrame(t, id3, snapMsg(30, 3)))
	var in inbound
	select {
	case in = <-n.recvc:
	default:
		t.Fatal("complete transfer not delivered")
	}
	if in.staged == nil || in.staged.Index() != 30 || in.staged.Term() != 3 {
		t.Fatalf("delivered %+v", in)
	}
	u := n.store.NewUpdate()
	defer u.Close()
	if err := u.InstallSnapshot(in.msg.GetSnapshot(), in.staged); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(true); err != nil {
		t.Fatal(err)
	}
	got := map[string]versioned{}
	n.store.ForEach(func(k, v []byte, ver uint64) error {
		got[string(k)] = versioned{string(v), ver}
		return nil
	})
	if want := map[string]versioned{"k1": {"v1", 7}, "k2": {"v2", 8}}; !maps.Equal(got, want) {
		t.Fatalf("installed %v, want %v", got, want)
	}
}

// recConn records the frames sent on it. The chunks of the transfers whose
// begin frames are numbered in block (from 1) block until their send's
// context ends, like a peer that stopped reading.
type recConn struct {
	max   int
	block map[int]bool

	mu      sync.Mutex
	log     []string // "B1", "C2", "S2", "C1 aborted": frame kind and transfer number
	nonces  map[uint64]int
	blocked chan int // transfer numbers, as their sends block
}

func (c *recConn) Send(ctx context.Context, msg []byte) error {
	if len(msg) > c.max {
		return transport.ErrMessageTooLarge
	}
	if IsPeerHello(msg) || msg[0] == frameMessage {
		return nil
	}
	id, _, err := parseSnapshotFrame(msg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	num, ok := c.nonces[id.nonce]
	if !ok {
		num = len(c.nonces) + 1
		c.nonces[id.nonce] = num
	}
	if msg[0] == frameSnapshotChunk && c.block[num] {
		c.mu.Unlock()
		c.blocked <- num
		<-ctx.Done()
		c.mu.Lock()
		c.log = append(c.log, fmt.Sprintf("C%d aborted", num))
		c.mu.Unlock()
		return ctx.Err()
	}
	c.log = append(c.log, fmt.Sprintf("%c%d", msg[0], num))
	c.mu.Unlock()
	return nil
}

func (c *recConn) frames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

func (c *recConn) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (c *recConn) Read(context.Context, []transport.ReadOp) error { return transport.ErrUnsupported }
func (c *recConn) MaxMessage() int                                { return c.max }
func (c *recConn) RemoteAddr() string                             { return "b" }
func (c *recConn) Close() error                                   { return nil }

// dialer is a transport whose Dial returns conn.
type dialer struct {
	transport.Transport
	conn transport.Conn
}

func (d dialer) Dial(context.Context, string) (transport.Conn, error) { return d.conn, nil }

// checkpointT makes a checkpoint of 40 keys at index 10, term 2.
func checkpointT(t *testing.T) *store.Store {
	t.Helper()
	st := openStore(t)
	u := st.NewUpdate()
	var errs []error
	ents := make([]*pb.Entry, 10)
	for i := range ents {
		ents[i] = &pb.Entry{Index: new(uint64(i + 1)), Term: new(uint64(2))}
	}
	errs = append(errs, u.Append(ents), u.SetConfState(&pb.ConfState{Voters: []uint64{1, 2}}))
	for i := range 40 {
		errs = append(errs, u.Put(fmt.Appendf(nil, "key%02d", i), bytes.Repeat([]byte{'v'}, 20), uint64(i+1)))
	}
	errs = append(errs, u.SetApplied(10))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(true); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateSnapshot(0); err != nil {
		t.Fatal(err)
	}
	return st
}

func nextReport(t *testing.T, n *Node) report {
	t.Helper()
	select {
	case r := <-n.reportc:
		return r
	case <-time.After(waitTimeout):
		t.Fatal("no report")
	}
	return report{}
}

// TestOneSnapshotTransferPerPeer checks that a new MsgSnap for a peer
// aborts the transfer under way and starts sending only once it stopped,
// that a change of term aborts a transfer too, and that each aborted one is
// reported failed.
func TestOneSnapshotTransferPerPeer(t *testing.T) {
	conn := &recConn{max: transport.DefaultMaxMessage, block: map[int]bool{1: true, 3: true},
		nonces: map[uint64]int{}, blocked: make(chan int, 4)}
	cfg := testConfig()
	cfg.Transport, cfg.SnapshotChunkSize = dialer{conn: conn}, 256 // several chunks
	n := fakeNode(t, cfg)
	src := checkpointT(t)
	msg := func(term uint64) *pb.Message {
		return &pb.Message{Type: pb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(term),
			Snapshot: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(10)), Term: new(uint64(2))}}}
	}
	send := func(seq uint64) {
		t.Helper()
		if !n.peers.sendSnapshot(msg(2+seq), src.Checkpoint(), seq) {
			t.Fatal("snapshot refused")
		}
	}
	waitBlocked := func(want int) {
		t.Helper()
		select {
		case got := <-conn.blocked:
			if got != want {
				t.Fatalf("transfer %d blocked, want %d", got, want)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("transfer %d never got to send data", want)
		}
	}

	send(1)
	waitBlocked(1)
	send(2) // supersedes transfer 1
	got := map[report]bool{nextReport(t, n): true, nextReport(t, n): true}
	want := map[report]bool{
		{to: 2, kind: reportSnapshotFailed, seq: 1}: true,
		{to: 2, kind: reportSnapshotDone, seq: 2}:   true,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("reports %v, want %v", got, want)
	}
	frames := conn.frames()
	var seen2 bool
	var n2 int
	for _, f := range frames {
		switch f {
		case "B2", "C2", "S2":
			seen2 = true
			n2++
		case "S1":
			t.Fatalf("aborted transfer 1 was ended: %v", frames)
		default:
			if seen2 {
				t.Fatalf("transfer 1 sent %s after transfer 2 began: %v", f, frames)
			}
		}
	}
	if frames[0] != "B1" || frames[1] != "C1 aborted" || frames[2] != "B2" || frames[len(frames)-1] != "S2" || n2 < 4 {
		t.Fatalf("frames %v: want B1, C1 aborted, then all of transfer 2 (B2, several C2, S2)", frames)
	}

	// A change of term aborts the transfer under way.
	send(3)
	waitBlocked(3)
	n.peers.abortTransfers()
	if r := nextReport(t, n); r != (report{to: 2, kind: reportSnapshotFailed, seq: 3}) {
		t.Fatalf("report %+v after abortTransfers", r)
	}
	if fs := conn.frames(); fs[len(fs)-1] != "C3 aborted" {
		t.Fatalf("frames after the abort: %v", fs)
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
	l := &loop{n: &Node{log: testLogger(), leases: newLessor()}, rn: rn, snapPending: map[uint64]uint64{2: 5}}
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
// cannot carry raft's largest message is refused on both sides, with an
// error saying so, rather than made to drop that message forever.
func TestMessageLimitChecked(t *testing.T) {
	cfg := testConfig().withDefaults()
	need := cfg.maxPeerMessage()
	if need <= MaxValueLen+MaxKeyLen || need > transport.DefaultMaxMessage {
		t.Fatalf("maxPeerMessage %d: must fit a max-size value and the default transport limit", need)
	}
	big := cfg
	big.MaxSizePerMsg = 2 << 20 // the largest Validate accepts
	if m := big.maxPeerMessage(); m < 3<<20 || m > transport.DefaultMaxMessage {
		t.Fatalf("maxPeerMessage with MaxSizePerMsg 2 MiB = %d", m)
	}

	// The dialling side.
	nw := newMemNet()
	small := nw.endpoint("a")
	small.maxMessage = 1 << 20
	ln, err := nw.endpoint("b").Listen("b")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg.Transport = small
	n := fakeNode(t, cfg)
	_, err = n.peers.get(2).dial()
	if !errors.Is(err, ErrConfig) || !errors.Is(err, transport.ErrMessageTooLarge) {
		t.Fatalf("dial over a 1 MiB connection: err = %v", err)
	}
	t.Log(err)
	// The dialled connection was closed without a hello.
	accepted, err := ln.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := accepted.Recv(ctxT(t), nil); err == nil {
		t.Fatalf("refused connection delivered %q", msg)
	}

	// The serving side.
	c := &limitConn{max: 1 << 20}
	n.ServePeer(c, appendHello(nil, hello{from: 2, addr: "b"}))
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
// reader queued after the loop exited is deleted by Close.
func TestCloseDiscardsQueuedSnapshot(t *testing.T) {
	cfg := testConfig()
	cfg.ID, cfg.DataDir, cfg.Transport = 1, t.TempDir(), newMemNet().endpoint("a")
	cfg.InitialCluster = map[uint64]string{1: "a"}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Stand in for a ServePeer call still delivering while Close runs.
	reader, _ := newMemPair(newMemNet(), "b", "a")
	if !n.track(reader) {
		t.Fatal("track refused")
	}
	closed := make(chan error)
	go func() { closed <- n.Close() }()
	<-n.donec
	st := n.store.NewStaged(50, 3)
	if err := errors.Join(st.Add([]byte("orphan"), make([]byte, 8)), st.Finish()); err != nil {
		t.Fatal(err)
	}
	n.recvc <- inbound{msg: snapMsg(50, 3), staged: st}
	n.untrack(reader)
	if err := <-closed; err != nil {
		t.Fatal(err)
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

func mustFrame(t *testing.T, m *pb.Message) []byte {
	t.Helper()
	b, err := appendMessageFrame(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// TestSnapshotTransferBounded: a peer's snapshot transfer whose data frames
// go past Config.MaxSnapshotBytes is abandoned, its staged data discarded,
// and the session ends (handle's error); each transfer is counted from its
// begin frame. Unbounded, a member session could stage data until the disk
// was full.
func TestSnapshotTransferBounded(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSnapshotBytes = 100
	n := fakeNode(t, cfg)
	n.store = openStore(t)
	r := &peerReader{n: n, from: 2}
	id := transferID{index: 10, term: 2, nonce: 1}
	value := strings.Repeat("v", 30)
	first := chunkFrame(id, 1, "a", value)
	handleAll(t, r, beginFrame(id), first, chunkFrame(id, 1, "b", value)) // about 2×45 bytes
	if r.staged == nil {
		t.Fatal("a transfer within the bound was abandoned")
	}
	err := r.handle(chunkFrame(id, 1, "c", value))
	if err == nil || r.staged != nil {
		t.Fatalf("a transfer past the bound: handle = %v, still staged %v", err, r.staged != nil)
	}
	// A new transfer starts from nothing.
	handleAll(t, r, beginFrame(transferID{index: 11, term: 2, nonce: 2}), chunkFrame(transferID{index: 11, term: 2, nonce: 2}, 1, "a", value))
	if r.staged == nil {
		t.Fatal("the next transfer was charged with the last one's bytes")
	}
}

// TestForeignSnapshotFramesCountedAndLogRateLimited: frames of transfers
// not being staged, and transfers ended by a message for another
// snapshot, are dropped, each counted, and logged at a limited rate: a
// member changing the transfer id on every frame made one 170-byte log
// line of each 25-byte frame.
func TestForeignSnapshotFramesCountedAndLogRateLimited(t *testing.T) {
	var lc logCapture
	cfg := testConfig()
	cfg.Logger = lc.logger()
	n := fakeNode(t, cfg)
	n.store = openStore(t)
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	n.metrics = m
	r := &peerReader{n: n, from: 2}
	const frames = 1000
	for i := range frames { // an empty chunk of a transfer never begun
		id := transferID{index: 10, term: 2, nonce: uint64(i + 1)}
		if err := r.handle(appendSnapshotFrameHeader(nil, frameSnapshotChunk, id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range frames { // a transfer whose end names another snapshot
		id := transferID{index: 10, term: 2, nonce: uint64(frames + i + 1)}
		handleAll(t, r, beginFrame(id), endFrame(t, id, snapMsg(11, 2)))
	}
	if got := droppedCount(t, n, dropSnapMismatch); got != 2*frames {
		t.Fatalf("%v drops counted, want %d", got, 2*frames)
	}
	lc.mu.Lock()
	lines := strings.Count(lc.buf.String(), "\n")
	lc.mu.Unlock()
	if lines > 10 {
		t.Fatalf("%d dropped frames from one session made %d log lines: not rate-limited", 2*frames, lines)
	}
}

// stuckConn is a peer connection that never takes a message: its credits
// never come back.
type stuckConn struct{ transport.Conn }

func (stuckConn) Send(ctx context.Context, _ []byte) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestSnapshotTransferToStuckPeerFails: a transfer whose frame the peer
// never takes fails after snapshotFrameTimeout (so its checkpoint is
// released and raft told), rather than waiting for a leadership change.
func TestSnapshotTransferToStuckPeerFails(t *testing.T) {
	defer func(d time.Duration) { snapshotFrameTimeout = d }(snapshotFrameTimeout)
	snapshotFrameTimeout = 10 * time.Millisecond
	id := transferID{index: 10, term: 2, nonce: 1}
	done := make(chan error, 1)
	go func() { done <- (&peer{}).sendTransfer(context.Background(), stuckConn{}, id, outMsg{}) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "took no snapshot frame") {
			t.Fatalf("transfer to a stuck peer: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("a transfer to a peer that takes nothing never ended")
	}
	// An aborted transfer ends as aborted, not as timed out.
	ctx, cancel := context.WithCancel(context.Background())
	snapshotFrameTimeout = time.Hour
	go func() { done <- (&peer{}).sendTransfer(ctx, stuckConn{}, id, outMsg{}) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("aborted transfer: %v", err)
	}
}
