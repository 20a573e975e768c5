package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// waitTimeout bounds every wait in these tests: only a hang reaches it.
const waitTimeout = 30 * time.Second

// delivery is a message the peer layer handed to its host.
type delivery struct {
	msg    *pb.Message
	staged *store.Staged
}

// report is what the peer layer told its host about a send.
type report struct {
	to, seq     uint64
	ok          bool
	unreachable bool
}

// fakeHost is a raft node as the peer layer sees it: node 1 of members 1,
// 2 and 3, reachable at "a", "b" and "c".
type fakeHost struct {
	recv    chan delivery
	reports chan report
	need    int // the message size CheckConn demands (0: any)

	mu          sync.Mutex
	members     map[uint64]bool
	addrs       map[uint64]string
	clientAddrs map[uint64]string
	removed     map[uint64]bool // ids removed (IsRemoved)
	toldBy      []uint64        // the members that told this node it was removed
}

func newFakeHost() *fakeHost {
	return &fakeHost{
		recv: make(chan delivery, 16), reports: make(chan report, 16),
		members:     map[uint64]bool{1: true, 2: true, 3: true},
		addrs:       map[uint64]string{1: "a", 2: "b", 3: "c"},
		clientAddrs: map[uint64]string{},
		removed:     map[uint64]bool{},
	}
}

func (h *fakeHost) Deliver(m *pb.Message, staged *store.Staged) error {
	h.recv <- delivery{msg: m, staged: staged}
	return nil
}

func (h *fakeHost) ReportUnreachable(id uint64) {
	select {
	case h.reports <- report{to: id, unreachable: true}:
	default:
	}
}

func (h *fakeHost) ReportSnapshot(id, seq uint64, ok bool) {
	h.reports <- report{to: id, seq: seq, ok: ok}
}

func (h *fakeHost) IsMember(id uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.members[id]
}

func (h *fakeHost) IsRemoved(id uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.removed[id]
}

func (h *fakeHost) Removed(by uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.toldBy = append(h.toldBy, by)
}

// told is the members that told this node it was removed, so far.
func (h *fakeHost) told() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.toldBy)
}

func (h *fakeHost) PeerAddr(id uint64) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addrs[id]
}

func (h *fakeHost) LearnAddr(id uint64, addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.addrs[id]; !ok {
		h.addrs[id] = addr
	}
}

func (h *fakeHost) LearnClientAddr(id uint64, addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clientAddrs[id] = addr
}

var errTooSmall = errors.New("connection too small")

func (h *fakeHost) CheckConn(conn transport.Conn) error {
	if conn.MaxMessage() < h.need {
		return fmt.Errorf("%w: %d bytes", errTooSmall, conn.MaxMessage())
	}
	return nil
}

// nextReport waits for the peer layer's next report.
func (h *fakeHost) nextReport(t *testing.T) report {
	t.Helper()
	select {
	case r := <-h.reports:
		return r
	case <-time.After(waitTimeout):
		t.Fatal("no report")
	}
	return report{}
}

// none fails if anything was delivered.
func (h *fakeHost) none(t *testing.T, what string) {
	t.Helper()
	select {
	case d := <-h.recv:
		t.Fatalf("%s: delivered %v", what, d.msg.GetType())
	default:
	}
}

// testSet is node 1's peer layer over h, of cluster 42 (unless cfg names
// another), with a store of its own unless cfg has one; it is closed when
// the test ends.
func testSet(t testing.TB, cfg Config, h *fakeHost) *Set {
	t.Helper()
	cfg.ID, cfg.Host = 1, h
	if cfg.Addr == "" {
		cfg.Addr = "a"
	}
	if cfg.Store == nil {
		cfg.Store = openStore(t)
	}
	if cfg.Transport == nil {
		cfg.Transport = dialer{}
	}
	if cfg.ClusterID == 0 {
		cfg.ClusterID = 42
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		s.Close()
	})
	return s
}

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{WALSegmentSize: 1 << 20}) // small: zero-filled when made
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Frames of a snapshot transfer, as a peer would send them.

func beginFrame(id TransferID) []byte { return AppendSnapshotBegin(nil, id) }

// chunkFrame holds key/value pairs (alternating in kv), each written
// at version, as history records.
func chunkFrame(id TransferID, version uint64, kv ...string) []byte {
	f := AppendSnapshotHeader(nil, FrameSnapshotChunk, id)
	for i := 0; i+1 < len(kv); i += 2 {
		m := revision.Meta{Create: version, Mod: version, Version: 1}
		k := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, version), uint32(i/2))
		f = AppendChunkRecord(f, append(k, kv[i]...), append(m.Append([]byte{0}), kv[i+1]...))
	}
	return f
}

func endFrame(t testing.TB, id TransferID, m *pb.Message) []byte {
	t.Helper()
	f, err := AppendSnapshotEnd(nil, id, m)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustFrame(t testing.TB, m *pb.Message) []byte {
	t.Helper()
	b, err := AppendMessage(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func handleAll(t testing.TB, r *Reader, frames ...[]byte) {
	t.Helper()
	for i, f := range frames {
		if err := r.Handle(f); err != nil {
			t.Fatalf("frame %d (%q): %v; the connection would drop", i, f[0], err)
		}
	}
}

func refusedCount(t testing.TB, s *Set, why Refusal) float64 {
	return peertest.CounterValue(t, s.metrics.RefusedTotal.WithLabelValues(string(why)))
}

func droppedCount(t testing.TB, s *Set, why DropReason) float64 {
	return peertest.CounterValue(t, s.metrics.DroppedTotal.WithLabelValues(string(why)))
}

// dialer's Dial returns conn.
type dialer struct{ conn transport.Conn }

func (d dialer) Dial(context.Context, string) (transport.Conn, error) {
	if d.conn == nil {
		return nil, errors.New("no connection")
	}
	return d.conn, nil
}
