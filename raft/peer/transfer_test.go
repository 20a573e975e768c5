package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// TestPeerReaderRejectsForeignFrames checks the receiver keeps the
// connection but ignores snapshot frames of any transfer but the one it
// stages, and drops a transfer whose end names another snapshot.
func TestPeerReaderRejectsForeignFrames(t *testing.T) {
	h := newFakeHost()
	st := openStore(t)
	s := testSet(t, Config{Store: st}, h)
	r := s.NewReader(2)
	none := func(what string) { t.Helper(); h.none(t, what) }
	id1 := TransferID{Index: 10, Term: 2, Nonce: 1}
	id2 := TransferID{Index: 20, Term: 3, Nonce: 2}

	handleAll(t, r, chunkFrame(id1, 1, "k", "v"), endFrame(t, id1, peertest.Snap(10, 2)))
	none("frames without a transfer")
	handleAll(t, r, mustFrame(t, peertest.Snap(10, 2)))
	none("a MsgSnap outside a transfer")

	handleAll(t, r, beginFrame(id1), chunkFrame(id1, 1, "a", "1"), chunkFrame(id2, 1, "z", "9"), endFrame(t, id2, peertest.Snap(20, 3)))
	none("frames of another transfer")
	if r.staged == nil || r.xfer != id1 {
		t.Fatal("foreign frames disturbed the transfer being staged")
	}
	handleAll(t, r, endFrame(t, id1, peertest.Snap(20, 3)))
	none("an end naming another snapshot")
	if r.staged != nil {
		t.Fatal("a transfer ended by another snapshot's message was kept")
	}

	// A clean transfer still goes through, with exactly its data.
	id3 := TransferID{Index: 30, Term: 3, Nonce: 3}
	handleAll(t, r, beginFrame(id3), chunkFrame(id3, 7, "k1", "v1"), chunkFrame(id1, 1, "stray", "x"),
		chunkFrame(id3, 8, "k2", "v2"), endFrame(t, id3, peertest.Snap(30, 3)))
	handleAll(t, r, chunkFrame(id3, 9, "late", "x")) // after the end: no transfer staged
	if r.staged != nil {
		t.Fatal("data staged after the transfer ended")
	}
	var in delivery
	select {
	case in = <-h.recv:
	default:
		t.Fatal("complete transfer not delivered")
	}
	if in.staged == nil || in.staged.Index() != 30 || in.staged.Term() != 3 {
		t.Fatalf("delivered %+v", in)
	}
	u := st.NewUpdate()
	defer u.Close()
	if err := u.InstallSnapshot(in.msg.GetSnapshot(), in.staged); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(true); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	st.ForEach(func(k, v []byte, m revision.Meta) error {
		got[string(k)] = fmt.Sprintf("%s@%d", v, m.Mod)
		return nil
	})
	if want := map[string]string{"k1": "v1@7", "k2": "v2@8"}; !maps.Equal(got, want) {
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
	if IsHello(msg) || msg[0] == FrameMessage || msg[0] == FrameDataFormat {
		return nil
	}
	id, _, err := parseSnapshotFrame(msg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	num, ok := c.nonces[id.Nonce]
	if !ok {
		num = len(c.nonces) + 1
		c.nonces[id.Nonce] = num
	}
	if msg[0] == FrameSnapshotChunk && c.block[num] {
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
		errs = append(errs, u.Put(fmt.Appendf(nil, "key%02d", i), bytes.Repeat([]byte{'v'}, 20), revision.Meta{Create: uint64(i + 1), Mod: uint64(i + 1), Version: 1}))
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

// TestOneSnapshotTransferPerPeer checks that a new MsgSnap for a peer
// aborts the transfer under way and starts sending only once it stopped,
// that a change of term aborts a transfer too, and that each aborted one is
// reported failed.
func TestOneSnapshotTransferPerPeer(t *testing.T) {
	conn := &recConn{max: transport.DefaultMaxMessage, block: map[int]bool{1: true, 3: true},
		nonces: map[uint64]int{}, blocked: make(chan int, 4)}
	h := newFakeHost()
	s := testSet(t, Config{Transport: dialer{conn: conn}, SnapshotChunkSize: 256}, h) // several chunks
	src := checkpointT(t)
	msg := func(term uint64) *pb.Message {
		return &pb.Message{Type: pb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(term),
			Snapshot: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(10)), Term: new(uint64(2))}}}
	}
	send := func(seq uint64) {
		t.Helper()
		if !s.SendSnapshot(msg(2+seq), src.Checkpoint(), seq) {
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
	got := map[report]bool{h.nextReport(t): true, h.nextReport(t): true}
	want := map[report]bool{
		{to: 2, seq: 1}:           true,
		{to: 2, seq: 2, ok: true}: true,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("reports %v, want %v", got, want)
	}
	frames := conn.frames()
	var seen2 bool
	var n2 int
	for _, f := range frames {
		switch f {
		case "B2", "C2", "L2", "H2", "S2":
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
		t.Fatalf("frames %v: want B1, C1 aborted, then all of transfer 2 (B2, several C2 and H2, S2)", frames)
	}

	// A change of term aborts the transfer under way.
	send(3)
	waitBlocked(3)
	s.AbortTransfers()
	if r := h.nextReport(t); r != (report{to: 2, seq: 3}) {
		t.Fatalf("report %+v after AbortTransfers", r)
	}
	if fs := conn.frames(); fs[len(fs)-1] != "C3 aborted" {
		t.Fatalf("frames after the abort: %v", fs)
	}
}

// TestMessageLimitRefused checks that a peer connection the host finds
// cannot carry raft's largest message (Host.CheckConn) is refused on both
// sides, rather than made to drop that message forever: a dialled one is
// closed before its hello, a served one before its first Recv.
func TestMessageLimitRefused(t *testing.T) {
	h := newFakeHost()
	h.need = 2 << 20
	dialled := &limitConn{max: 1 << 20}
	s := testSet(t, Config{Transport: dialer{conn: dialled}}, h)
	if _, err := s.get(2).dial(); !errors.Is(err, errTooSmall) {
		t.Fatalf("dial over a 1 MiB connection: err = %v", err)
	}
	if dialled.sends != 0 || !dialled.closed {
		t.Fatalf("dialled connection: %d sends, closed %v; want it closed without a hello", dialled.sends, dialled.closed)
	}

	served := &limitConn{max: 1 << 20}
	before := refusedCount(t, s, RefuseMessageLimit)
	s.Serve(served, AppendHello(nil, Hello{From: 2, Cluster: 42, Addr: "b", Format: store.DataFormat}))
	if served.recvs != 0 || !served.closed || refusedCount(t, s, RefuseMessageLimit) != before+1 {
		t.Fatalf("Serve on a 1 MiB connection: %d Recv calls, closed %v", served.recvs, served.closed)
	}
}

type limitConn struct {
	transport.Conn
	max    int
	sends  int
	recvs  int
	closed bool
}

func (c *limitConn) MaxMessage() int    { return c.max }
func (c *limitConn) RemoteAddr() string { return "b" }
func (c *limitConn) Close() error       { c.closed = true; return nil }
func (c *limitConn) Send(context.Context, []byte) error {
	c.sends++
	return nil
}
func (c *limitConn) Recv(context.Context, []byte) ([]byte, error) {
	c.recvs++
	return nil, transport.ErrClosed
}

// TestSnapshotTransferBounded: a peer's snapshot transfer whose data frames
// go past Config.MaxSnapshotBytes is abandoned, its staged data discarded,
// and the session ends (Handle's error); each transfer is counted from its
// begin frame. Unbounded, a member session could stage data until the disk
// was full.
func TestSnapshotTransferBounded(t *testing.T) {
	s := testSet(t, Config{MaxSnapshotBytes: 180}, newFakeHost())
	r := s.NewReader(2)
	id := TransferID{Index: 10, Term: 2, Nonce: 1}
	value := strings.Repeat("v", 30)
	first := chunkFrame(id, 1, "a", value)
	handleAll(t, r, beginFrame(id), first, chunkFrame(id, 1, "b", value)) // about 2×83 bytes
	if r.staged == nil {
		t.Fatal("a transfer within the bound was abandoned")
	}
	err := r.Handle(chunkFrame(id, 1, "c", value))
	if err == nil || r.staged != nil {
		t.Fatalf("a transfer past the bound: handle = %v, still staged %v", err, r.staged != nil)
	}
	// A new transfer starts from nothing.
	handleAll(t, r, beginFrame(TransferID{Index: 11, Term: 2, Nonce: 2}), chunkFrame(TransferID{Index: 11, Term: 2, Nonce: 2}, 1, "a", value))
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
	var lc peertest.LogCapture
	s := testSet(t, Config{Logger: lc.Logger()}, newFakeHost())
	r := s.NewReader(2)
	const frames = 1000
	for i := range frames { // an empty chunk of a transfer never begun
		id := TransferID{Index: 10, Term: 2, Nonce: uint64(i + 1)}
		if err := r.Handle(AppendSnapshotHeader(nil, FrameSnapshotChunk, id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range frames { // a transfer whose end names another snapshot
		id := TransferID{Index: 10, Term: 2, Nonce: uint64(frames + i + 1)}
		handleAll(t, r, beginFrame(id), endFrame(t, id, peertest.Snap(11, 2)))
	}
	if got := droppedCount(t, s, DropSnapMismatch); got != 2*frames {
		t.Fatalf("%v drops counted, want %d", got, 2*frames)
	}
	if lines := lc.Lines(); lines > 10 {
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
// never takes fails after Knobs.SnapshotFrameTimeout (so its checkpoint is
// released and raft told), rather than waiting for a leadership change.
func TestSnapshotTransferToStuckPeerFails(t *testing.T) {
	short := &peer{ps: &Set{cfg: Config{Knobs: Knobs{SnapshotFrameTimeout: 10 * time.Millisecond}}}}
	long := &peer{ps: &Set{cfg: Config{Knobs: Knobs{SnapshotFrameTimeout: time.Hour}}}}
	id := TransferID{Index: 10, Term: 2, Nonce: 1}
	done := make(chan error, 1)
	go func() { done <- short.sendTransfer(context.Background(), stuckConn{}, id, outMsg{}) }()
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
	go func() { done <- long.sendTransfer(ctx, stuckConn{}, id, outMsg{}) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("aborted transfer: %v", err)
	}
}
