package peer

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// TestPeerHelloDataFormat: the hello carries the sender's data format
// after the addresses; a hello without one (the previous build's, with or
// without a client address) still parses, as format 1, and one whose
// format field is malformed does not.
func TestPeerHelloDataFormat(t *testing.T) {
	for _, h := range []Hello{
		{From: 3, Cluster: 42, Addr: "host:1", Format: store.DataFormat},
		{From: 3, Cluster: 42, Addr: "host:1", ClientAddr: "host:2", Format: store.DataFormat},
		{From: 3, Cluster: 42, Addr: "host:1", Format: 0x0100}, // a format whose encoding holds 0x00
		{From: 3, Cluster: 42, Format: store.DataFormat},       // no address (a forged or test hello)
	} {
		got, err := parseHello(AppendHello(nil, h))
		if err != nil || got != h || got.DataFormat() != uint64(h.Format) {
			t.Errorf("parseHello(AppendHello(%+v)) = %+v, %v", h, got, err)
		}
	}
	for _, old := range []string{"host:1", "host:1\x00host:2"} {
		b := append(AppendHello(nil, Hello{From: 3, Cluster: 42}), old...)
		got, err := parseHello(b)
		if err != nil || got.Format != 0 || got.DataFormat() != store.DataFormatNoRevisions || got.Addr != "host:1" {
			t.Errorf("previous build's hello %q: %+v (format %d), %v; want format %d", old, got, got.DataFormat(), err, store.DataFormatNoRevisions)
		}
	}
	for _, bad := range []string{"host:1\x00\x00", "host:1\x00\x00\x02", "host:1\x00\x00\x02\x00\x00", "host:1\x00\x00\x00\x00",
		"host:1\x00", "\x00", "host:1\x00host:1", "host:1\x00host:1\x00\x02\x00"} { // fields AppendHello never sends
		if h, err := parseHello(append(AppendHello(nil, Hello{From: 3, Cluster: 42}), bad...)); err == nil {
			t.Errorf("hello with tail %q accepted: %+v", bad, h)
		}
	}
}

// peerConn is an accepted connection of a peer (no credential checked).
type peerConn struct {
	transport.Conn // nil: any other method would panic the test
	closed         bool
}

func (c *peerConn) Close() error       { c.closed = true; return nil }
func (c *peerConn) RemoteAddr() string { return "peer:2" }

// syncBuffer is a log sink a test reads while the set writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeRefusesAnotherDataFormat: a member of this cluster whose hello
// names another data format (none: the build before revisions; one of
// the older builds'; or a newer one)
// is refused before its session is served, counted under data_format, and
// logged naming both formats and the way forward; one of this node's
// format is admitted.
func TestServeRefusesAnotherDataFormat(t *testing.T) {
	logs := &syncBuffer{}
	s := testSet(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))}, newFakeHost())
	for _, tc := range []struct {
		format uint16
		want   string
	}{
		{0, "node 2 runs data format 1 (an older kvd); this node runs data format 7: every member of a cluster must run one format: stop every member"},
		{store.DataFormatRevisions, "node 2 runs data format 2 (an older kvd); this node runs data format 7: every member of a cluster must run one format: upgrade each member to the newer kvd, which migrates its data directory at start"},
		{store.DataFormatValueByKey, "node 2 runs data format 3 (an older kvd); this node runs data format 7: every member of a cluster must run one format: upgrade each member to the newer kvd, which migrates its data directory at start"},
		{store.DataFormatHistoryByRevision, "node 2 runs data format 4 (an older kvd); this node runs data format 7: every member of a cluster must run one format: upgrade each member to the newer kvd, which migrates its data directory at start"},
		{store.DataFormatPastRangeTxn, "node 2 runs data format 5 (an older kvd); this node runs data format 7: every member of a cluster must run one format: upgrade each member to the newer kvd, which migrates its data directory at start"},
		{store.DataFormatByKey, "node 2 runs data format 6 (an older kvd); this node runs data format 7: every member of a cluster must run one format: upgrade each member to the newer kvd, which migrates its data directory at start"},
		{store.DataFormat + 1, "node 2 runs data format 8 (a newer kvd); this node runs data format 7: every member of a cluster must run one format: upgrade each member"},
	} {
		before := refusedCount(t, s, RefuseDataFormat)
		conn := &peerConn{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Serve(conn, AppendHello(nil, Hello{From: 2, Cluster: s.ClusterID(), Addr: "b", Format: tc.format}))
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("format %d: the session was not refused", tc.format)
		}
		if !conn.closed || refusedCount(t, s, RefuseDataFormat) != before+1 {
			t.Fatalf("format %d: closed %v, data_format refusals %v (was %v)", tc.format, conn.closed, refusedCount(t, s, RefuseDataFormat), before)
		}
		// One line per reason per ratelog period: the second refusal is
		// counted but not logged.
		if tc.format == 0 {
			for _, want := range []string{"refusing peer connection", "reason=data_format", tc.want, "kvctl snapshot save", "kvd --restore", "docs/upgrading.md"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, logs)
				}
			}
		}
		_, why, err := s.admitHello(AppendHello(nil, Hello{From: 2, Cluster: s.ClusterID(), Addr: "b", Format: tc.format}))
		if why != RefuseDataFormat || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("format %d: admitHello = %q, %v; want data_format naming %q", tc.format, why, err, tc.want)
		}
	}
	if _, why, err := s.admitHello(AppendHello(nil, Hello{From: 2, Cluster: s.ClusterID(), Addr: "b", Format: store.DataFormat})); err != nil {
		t.Fatalf("a peer of this node's format refused: %q, %v", why, err)
	}
}

// sendsConn records what is sent on a dialled connection.
type sendsConn struct {
	limitConn
	mu   sync.Mutex
	sent [][]byte
}

func (c *sendsConn) Send(_ context.Context, msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, bytes.Clone(msg))
	return nil
}

// TestDialSendsDataFormatFirst: a dialled session begins with the hello,
// naming this node's data format, then the data format frame, before any
// raft message: a node of the previous build, which reads no format in
// the hello, drops the session at that frame (an unknown one to it)
// rather than take entries of another data model.
func TestDialSendsDataFormatFirst(t *testing.T) {
	conn := &sendsConn{limitConn: limitConn{max: 64 << 20}}
	s := testSet(t, Config{Transport: dialer{conn: conn}}, newFakeHost())
	if _, err := s.get(2).dial(); err != nil {
		t.Fatal(err)
	}
	conn.mu.Lock()
	defer conn.mu.Unlock()
	if len(conn.sent) != 2 {
		t.Fatalf("dial sent %d messages, want the hello and the format frame", len(conn.sent))
	}
	h, err := parseHello(conn.sent[0])
	if err != nil || h.Format != store.DataFormat {
		t.Fatalf("first message: hello %+v, %v; want one naming format %d", h, err, store.DataFormat)
	}
	if f := conn.sent[1]; len(f) != 3 || f[0] != FrameDataFormat || binary.LittleEndian.Uint16(f[1:]) != store.DataFormat {
		t.Fatalf("second message %q; want the data format frame of format %d", f, store.DataFormat)
	}
}

// TestReaderChecksDataFormatFrame: a session's format frame of this
// node's format passes; another format, or a malformed frame, ends the
// session.
func TestReaderChecksDataFormatFrame(t *testing.T) {
	s := testSet(t, Config{}, newFakeHost())
	r := s.NewReader(2)
	defer r.Close()
	if err := r.Handle(appendDataFormat(nil, store.DataFormat)); err != nil {
		t.Fatalf("format frame of this node's format: %v", err)
	}
	for _, bad := range [][]byte{appendDataFormat(nil, store.DataFormat+1), appendDataFormat(nil, store.DataFormatNoRevisions),
		{FrameDataFormat, 2}, append(appendDataFormat(nil, store.DataFormat), 0)} {
		if err := r.Handle(bad); err == nil {
			t.Errorf("format frame %q accepted", bad)
		}
	}
}

// countingDialer counts dials and returns its connection.
type countingDialer struct {
	conn  transport.Conn
	dials atomic.Int32
}

func (d *countingDialer) Dial(context.Context, string) (transport.Conn, error) {
	d.dials.Add(1)
	return d.conn, nil
}

// TestPeerOfAnotherFormatNotDialled: once a member's hello named another
// data format, this node does not dial it (each dial would only be dropped
// there, and logged by it), and reports it unreachable; once a hello of it
// names this node's format (it was upgraded), it is dialled again.
func TestPeerOfAnotherFormatNotDialled(t *testing.T) {
	h := newFakeHost()
	d := &countingDialer{conn: &sendsConn{limitConn: limitConn{max: 64 << 20}}}
	s := testSet(t, Config{Transport: d}, h)
	s.Serve(&peerConn{}, AppendHello(nil, Hello{From: 2, Cluster: s.ClusterID(), Addr: "b"})) // the previous build's
	if !s.Send(peertest.Heartbeat(1, 2, 1, 0)) {
		t.Fatal("Send refused")
	}
	if r := h.nextReport(t); r != (report{to: 2, unreachable: true}) {
		t.Fatalf("report %+v; want 2 unreachable", r)
	}
	if n := d.dials.Load(); n != 0 {
		t.Fatalf("a member of another data format was dialled %d times", n)
	}
	s.Serve(&limitConn{max: 64 << 20}, AppendHello(nil, Hello{From: 2, Cluster: s.ClusterID(), Addr: "b", Format: store.DataFormat}))
	s.Send(peertest.Heartbeat(1, 2, 1, 0))
	wait.NoError(t, "member 2 to be dialled", func() error {
		if d.dials.Load() == 0 {
			return fmt.Errorf("not dialled")
		}
		return nil
	})
}
