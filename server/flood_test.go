package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/ratelog"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft/peer"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// Connection floods (idle, half-sent frames, clients that never
// read, oversized READs, too many connections) cost the server bounded
// memory, are refused or closed, counted and logged, and legitimate clients
// are served throughout.

// floodServer starts a single-node server on a tcp transport made with
// tcfg.
func floodServer(t *testing.T, cfg Config, tcfg tcp.Config) *Server {
	t.Helper()
	tr, err := tcp.New(tcfg)
	if err != nil {
		t.Fatal(err)
	}
	return floodServerOn(t, cfg, tr)
}

func floodServerOn(t *testing.T, cfg Config, tr transport.Transport) *Server {
	t.Helper()
	t.Cleanup(func() { tr.Close() })
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	cfg.DataDir = t.TempDir()
	cfg.Transport = tr
	// Small WAL segments: each is zero-filled when made (kvdtest.WALSegmentSize).
	cfg.Knobs.WALSegmentSize = cmp.Or(cfg.Knobs.WALSegmentSize, 4<<20)
	if cfg.TableMem == 0 {
		cfg.TableMem = 8 << 20
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	wait.For(t, "the node to lead", func() bool { st := s.node.Status(); return st.IsLeader && st.LeaseValid })
	return s
}

// refusedCount is kvd_connections_refused_total{reason}.
func refusedCount(s *Server, reason string) int {
	return int(testutil.ToFloat64(s.metrics.connRefusals.WithLabelValues(reason)))
}

// legit checks that a fresh client is served: a PUT and a GET (one-sided)
// and an RPC GET.
func legit(t *testing.T, s *Server) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("a legitimate client was served in %v", time.Since(start).Round(time.Millisecond)) }()
	c, err := client.New(client.Config{Endpoints: []string{s.Addr()}, RequestTimeout: 20 * time.Second,
		AttemptTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	key := []byte(fmt.Sprintf("legit-%d", time.Now().UnixNano()))
	// Served means served within a minute: under -race on a busy machine
	// one attempt can outlast its 10 s while the flood is being refused,
	// and the client (rightly) reports it as maybe applied; the same PUT
	// again is harmless. A node that starves the client fails every try.
	for deadline := time.Now().Add(time.Minute); ; {
		err := c.Put(ctx, key, []byte("served"))
		if err == nil {
			break
		}
		if !errors.Is(err, client.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("a legitimate client's PUT: %v", err)
		}
		t.Logf("a legitimate client's PUT, tried again: %v", err)
	}
	for _, level := range []client.Consistency{client.Linearizable, client.ReadIndex} {
		got, err := c.Get(ctx, key, client.WithConsistency(level))
		if err != nil || string(got) != "served" {
			t.Fatalf("a legitimate client's GET (%v): %q, %v", level, got, err)
		}
	}
}

// heapNow is the live heap after a full collection.
func heapNow() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// Raw clients speak the tcp transport's wire (transport/tcp/doc.go) by
// hand, so that they cost the server's process nothing but a socket, and
// can misbehave.

func rawHello(maxMessage, credits uint32) []byte {
	b := make([]byte, 24)
	copy(b, "KVDT")
	binary.LittleEndian.PutUint16(b[4:], 1)
	binary.LittleEndian.PutUint32(b[8:], maxMessage)
	binary.LittleEndian.PutUint32(b[12:], credits)
	binary.LittleEndian.PutUint32(b[16:], 1)
	return b
}

// rawMsg frames msg as a MSG announcing length bytes (len(msg) unless
// the frame is to be left unfinished).
func rawMsg(msg []byte, length int) []byte {
	b := make([]byte, 16, 16+len(msg))
	b[0] = 1
	binary.LittleEndian.PutUint64(b[8:], uint64(length))
	return append(b, msg...)
}

func rawRequest(req *wire.Request) []byte {
	m := wire.AppendRequest(nil, req)
	return rawMsg(m, len(m))
}

// dialRaw connects to addr and exchanges hellos, announcing credits.
func dialRaw(t *testing.T, addr string, credits uint32) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := nc.Write(rawHello(8<<20, credits)); err != nil {
		t.Fatal(err)
	}
	var h [24]byte
	if _, err := io.ReadFull(nc, h[:]); err != nil {
		t.Fatalf("raw client: server hello: %v", err)
	}
	if _, err := io.CopyN(io.Discard, nc, int64(binary.LittleEndian.Uint16(h[6:]))); err != nil {
		t.Fatal(err)
	}
	return nc
}

// readRawFrame reads one frame: its type and payload.
func readRawFrame(t *testing.T, nc net.Conn) (byte, []byte) {
	t.Helper()
	var h [16]byte
	if _, err := io.ReadFull(nc, h[:]); err != nil {
		t.Fatalf("raw client: frame header: %v", err)
	}
	p := make([]byte, binary.LittleEndian.Uint64(h[8:]))
	if _, err := io.ReadFull(nc, p); err != nil {
		t.Fatalf("raw client: frame payload: %v", err)
	}
	return h[0], p
}

// helloed is a raw client that has made one request (as a real client's
// first) and then sits idle.
func helloed(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc := dialRaw(t, addr, 64)
	if _, err := nc.Write(rawRequest(&wire.Request{Op: wire.OpHello, ID: 1})); err != nil {
		t.Fatal(err)
	}
	for {
		if typ, _ := readRawFrame(t, nc); typ == 1 {
			return nc
		}
	}
}

// closedByServer waits for the server to close nc, reading and dropping
// whatever it sent before.
func closedByServer(t *testing.T, nc net.Conn, within time.Duration) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(within))
	if _, err := io.Copy(io.Discard, nc); err != nil {
		t.Fatalf("the server did not close the connection within %v: %v", within, err)
	}
}

// maxIdleHeap is the acceptance bound on the server's heap per idle
// client connection.
const maxIdleHeap = 64 << 10

// TestFloodIdleConnections: 500 clients that connect, say hello and sit
// idle cost the server at most maxIdleHeap each, and are closed after the
// idle timeout; a legitimate client is served meanwhile.
func TestFloodIdleConnections(t *testing.T) {
	skipShort(t)
	const n = 500
	const idle = 3 * time.Second
	s := floodServer(t, Config{}, tcp.Config{IdleTimeout: idle})
	base := heapNow()
	g0 := runtime.NumGoroutine()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = helloed(t, s.Addr())
	}
	time.Sleep(100 * time.Millisecond)
	per := float64(heapNow()-base) / n
	g := float64(runtime.NumGoroutine()-g0) / n
	t.Logf("per idle client connection: server heap %.1f KiB, %.2f goroutines", per/1024, g)
	if per > maxIdleHeap {
		t.Errorf("an idle client connection costs the server %.1f KiB of heap; want at most %d KiB", per/1024, maxIdleHeap>>10)
	}
	legit(t, s)
	for _, nc := range conns {
		closedByServer(t, nc, idle+10*time.Second)
	}
	wait.For(t, "idle closures counted", func() bool { return refusedCount(s, tcp.ReasonIdle) >= n })
}

// TestFloodMaxConnections: beyond --max-connections a dialer is refused at
// once with a message that says why, and counted; closing one makes room.
func TestFloodMaxConnections(t *testing.T) {
	skipShort(t)
	const max = 8
	s := floodServer(t, Config{MaxConnections: max}, tcp.Config{})
	var conns []net.Conn
	for range max {
		conns = append(conns, helloed(t, s.Addr()))
	}
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = tr.Dial(ctx, s.Addr())
	if !errors.Is(err, tcp.ErrRefused) || !strings.Contains(err.Error(), "--max-connections") {
		t.Fatalf("Dial beyond --max-connections: %v; want ErrRefused naming the flag", err)
	}
	t.Logf("refused dialer sees: %v", err)
	c, err := client.New(client.Config{Endpoints: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	_, err = c.Get(short, []byte("k"))
	cancelShort()
	c.Close()
	if !errors.Is(err, tcp.ErrRefused) {
		t.Fatalf("client beyond --max-connections: %v; want ErrRefused", err)
	}
	wait.For(t, "the refusal counted", func() bool { return refusedCount(s, tcp.ReasonMaxConns) >= 1 })
	conns[0].Close()
	wait.For(t, "the server to let the closed connection go", func() bool { return s.connCount() < max })
	legit(t, s)
}

// limitless hides the tcp listener's own cap, as a transport that enforces
// none would: the server's accept loop must then enforce it.
type limitless struct{ transport.Transport }

func (l limitless) Listen(addr string) (transport.Listener, error) {
	ln, err := l.Transport.Listen(addr)
	return limitlessListener{ln}, err
}

type limitlessListener struct{ transport.Listener }

func TestFloodMaxConnectionsOtherTransports(t *testing.T) {
	const max = 3
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := floodServerOn(t, Config{MaxConnections: max}, limitless{tr})
	for range max {
		helloed(t, s.Addr())
	}
	nc := dialRaw(t, s.Addr(), 64)
	closedByServer(t, nc, 10*time.Second)
	wait.For(t, "the refusal counted", func() bool { return refusedCount(s, transport.ReasonMaxConns) == 1 })
	if n := s.connCount(); n != max {
		t.Fatalf("the server holds %d connections, want %d", n, max)
	}
}

// TestFloodHalfSentFrames: clients that announce the largest message and
// stall hold only what they sent, and only for the read timeout.
func TestFloodHalfSentFrames(t *testing.T) {
	skipShort(t)
	const (
		n       = 100
		sent    = 32 << 10
		timeout = 2 * time.Second
	)
	s := floodServer(t, Config{}, tcp.Config{ReadTimeout: timeout})
	base := heapNow()
	conns := make([]net.Conn, n)
	start := time.Now()
	for i := range conns {
		conns[i] = helloed(t, s.Addr())
		if _, err := conns[i].Write(rawMsg(make([]byte, sent), transport.DefaultMaxMessage)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	per := float64(heapNow()-base) / n
	t.Logf("per connection holding a %d MiB frame %d KiB in: server heap %.1f KiB (set up in %v)",
		transport.DefaultMaxMessage>>20, sent>>10, per/1024, time.Since(start).Round(time.Millisecond))
	if per > 256<<10 {
		t.Errorf("a half-sent frame costs the server %.0f KiB; want well under the %d MiB it announced",
			per/1024, transport.DefaultMaxMessage>>20)
	}
	legit(t, s)
	for _, nc := range conns {
		closedByServer(t, nc, timeout+10*time.Second)
	}
	wait.For(t, "read timeouts counted", func() bool { return refusedCount(s, tcp.ReasonRead) == n })
}

// neverReading sends count GETs for key on a raw connection announcing
// credits, and never reads the replies.
func neverReading(t *testing.T, addr string, credits uint32, key []byte, count int) net.Conn {
	t.Helper()
	nc := dialRaw(t, addr, credits)
	var b []byte
	for i := range count {
		b = append(b, rawRequest(&wire.Request{Op: wire.OpGet, ID: uint64(i + 1), Flags: wire.Serializable, Key: key})...)
	}
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	return nc
}

// TestFloodNeverReadingClient: clients that ask for a 1 MiB value 64 times
// and never read the replies hold at most the connection's budget
// (maxConnBytes) while the server waits for them, and are closed as slow
// readers, whether they hold back their credits or, granting credits, the
// bytes of the transport's window.
func TestFloodNeverReadingClient(t *testing.T) {
	skipShort(t)
	const (
		n       = 4
		timeout = 2 * time.Second
	)
	s := floodServer(t, Config{Knobs: Knobs{ReplyTimeout: timeout}}, tcp.Config{WriteTimeout: timeout})
	value := bytes.Repeat([]byte("v"), table.MaxValue)
	key := []byte("big")
	if resp := s.put(context.Background(), key, value); resp.Status != wire.StatusOK {
		t.Fatalf("put: %+v", resp)
	}
	for _, tt := range []struct {
		name    string
		credits uint32
		reasons []string // the closures count under these, together
	}{
		// All the credits it wants: the transport's byte window
		// (tcp.DefaultQueueBytes) holds the replies (slow reader), unless
		// its socket fills first (the write timeout), as the kernel's
		// buffers decide; both timeouts are 2s here.
		{"byte window or socket fills", 65535, []string{transport.ReasonSlowReader, tcp.ReasonWrite}},
		{"credits held back (slow reader)", 1, []string{transport.ReasonSlowReader}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := heapNow()
			closures := func() (n int) {
				for _, r := range tt.reasons {
					n += refusedCount(s, r)
				}
				return n
			}
			before := closures()
			var conns []net.Conn
			for range n {
				conns = append(conns, neverReading(t, s.Addr(), tt.credits, key, 64))
			}
			time.Sleep(timeout / 2)
			per := float64(heapNow()-base) / n
			t.Logf("per client asking for 64 MiB and reading nothing: server heap %.1f MiB", per/(1<<20))
			if per > maxConnBytes+4<<20 {
				t.Errorf("a never-reading client holds %.1f MiB of the server's heap; want at most about %d MiB",
					per/(1<<20), maxConnBytes>>20)
			}
			legit(t, s)
			// Reading would let the writes through: count first, then check.
			wait.For(t, "the closures counted", func() bool { return closures()-before == n })
			for _, nc := range conns {
				closedByServer(t, nc, 10*time.Second)
			}
			wait.For(t, "the heap to come back", func() bool { return heapNow()-base < 4<<20 })
		})
	}
}

// TestSlowReaderCountedOnceAcrossLimits: a connection closed as a slow
// reader is counted once however many of its replies time out, and not at
// all when a transport limit (its write timeout, which counts under its
// own reason) closed it first: both can fire for one never-reading client.
func TestSlowReaderCountedOnceAcrossLimits(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	for _, tt := range []struct {
		name         string
		closedBefore bool
		want         int
	}{
		{"open: counted once for two replies", false, 1},
		{"closed first by a transport limit: not counted", true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn := tcpPair(t)
			if tt.closedBefore {
				conn.Close()
			}
			before := refusedCount(s, transport.ReasonSlowReader)
			var once sync.Once
			for range 2 {
				s.closeSlowReader(conn, &once, "a reply")
			}
			if got := refusedCount(s, transport.ReasonSlowReader) - before; got != tt.want {
				t.Fatalf("slow_reader counted %d times; want %d", got, tt.want)
			}
		})
	}
}

// tcpPair is the dialing end of a fresh tcp connection on a transport of
// its own.
func tcpPair(t *testing.T) transport.Conn {
	t.Helper()
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := tr.Dial(ctx, ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := ln.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestFloodOversizedRead: a 272-byte READ request for more than
// transport.MaxReadBatchBytes gets no data, only a closed connection, and
// is counted; the largest READ batch a kvd GET can need is within it.
func TestFloodOversizedRead(t *testing.T) {
	if worst := table.HeaderSize + 2*table.BucketSize + (transport.MaxBatch-3)*table.MaxRecord; worst > transport.MaxReadBatchBytes {
		t.Fatalf("a GET's second round trip may read %d bytes, over MaxReadBatchBytes %d", worst, transport.MaxReadBatchBytes)
	}
	s := floodServer(t, Config{}, tcp.Config{})
	d := s.region.Descriptor()
	nc := dialRaw(t, s.Addr(), 64)
	req := make([]byte, 16+transport.MaxBatch*16)
	req[0], req[1] = 3, transport.MaxBatch
	binary.LittleEndian.PutUint64(req[8:], transport.MaxBatch*16)
	for i := range transport.MaxBatch {
		op := req[16+i*16:]
		binary.LittleEndian.PutUint64(op, d.Addr)
		binary.LittleEndian.PutUint32(op[8:], uint32(d.Len))
		binary.LittleEndian.PutUint32(op[12:], d.Key)
	}
	if _, err := nc.Write(req); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.Copy(io.Discard, nc); err != nil || got != 0 {
		t.Fatalf("a %d-byte request for %d MiB got %d bytes back, %v; want none and EOF",
			len(req), transport.MaxBatch*d.Len>>20, got, err)
	}
	wait.For(t, "the refusal counted", func() bool { return refusedCount(s, tcp.ReasonReadTooLarge) == 1 })
	legit(t, s)
}

// TestFloodMalformedRequests: a client that sends garbage is closed and
// counted (and logged at most once per refusalLogEvery).
func TestFloodMalformedRequests(t *testing.T) {
	skipShort(t)
	s := floodServer(t, Config{}, tcp.Config{})
	for range 3 {
		nc := dialRaw(t, s.Addr(), 64)
		if _, err := nc.Write(rawMsg([]byte("garbage"), 7)); err != nil {
			t.Fatal(err)
		}
		closedByServer(t, nc, 10*time.Second)
	}
	wait.For(t, "the refusals counted", func() bool { return refusedCount(s, transport.ReasonMalformed) == 3 })
	// A socket that connects and hangs up fails its handshake.
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	wait.For(t, "the failed handshake counted", func() bool { return refusedCount(s, tcp.ReasonHandshake) == 1 })
	legit(t, s)
}

func TestRefusalLogRateLimited(t *testing.T) {
	var ll ratelog.Limiter
	now := time.Now()
	if ok, _ := ll.Allow("x", now); !ok {
		t.Fatal("first line held back")
	}
	for i := range 5 {
		if ok, _ := ll.Allow("x", now.Add(time.Duration(i)*time.Second)); ok {
			t.Fatal("line within the interval let through")
		}
	}
	if ok, _ := ll.Allow("y", now); !ok {
		t.Fatal("another reason held back")
	}
	if ok, held := ll.Allow("x", now.Add(refusalLogEvery)); !ok || held != 5 {
		t.Fatalf("after the interval: %v, %d held; want true, 5", ok, held)
	}
}

// TestPeerSessionsExemptFromIdle: a 3-node cluster whose transports close
// idle connections quickly keeps its peer sessions, even the ones that
// carry nothing: after the leader is frozen and replaced, the old leader
// (a follower now) sends nothing on the connection it dialed to the other
// follower, which must still be there for the next election.
func TestPeerSessionsExemptFromIdle(t *testing.T) {
	skipShort(t)
	const idle = 300 * time.Millisecond
	addrs := make([]string, 3)
	cluster := map[uint64]string{}
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
		cluster[uint64(i+1)] = addrs[i]
	}
	servers := make([]*Server, 3)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			tr, err := tcp.New(tcp.Config{Node: addrs[i], IdleTimeout: idle})
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { tr.Close() })
			s, err := New(Config{ID: uint64(i + 1), Listen: addrs[i], DataDir: t.TempDir(), InitialCluster: cluster,
				Transport: tr, TableMem: 1 << 20, TickInterval: 20 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { s.Close() })
			servers[i] = s
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	leader := func() *Server {
		for _, s := range servers {
			if st := s.node.Status(); st.IsLeader && st.LeaseValid {
				return s
			}
		}
		return nil
	}
	wait.For(t, "a leader", func() bool { return leader() != nil })
	old := leader()
	if err := old.Freeze(time.Second); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "another leader", func() bool { l := leader(); return l != nil && l != old })
	time.Sleep(time.Second + 4*idle) // the freeze, then idle timeouts several times over
	for i, s := range servers {
		if n := refusedCount(s, tcp.ReasonIdle); n != 0 {
			t.Errorf("node %d closed %d idle connections; peer sessions must be exempt", i+1, n)
		}
	}
}

// TestPeerHelloDuringFreezeKeepsItsConnection: a peer's connection whose
// hello reaches a frozen node waits for the thaw exempt from the idle
// timeout, as a peer session is: a stalled process closes nothing (its
// transport stalls with it), and the node the freeze stands for must not
// either, or the peer's session breaks on the first election after it.
func TestPeerHelloDuringFreezeKeepsItsConnection(t *testing.T) {
	skipShort(t)
	const idle = 100 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tr, err := tcp.New(tcp.Config{Node: addr, IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	s, err := New(Config{ID: 1, Listen: addr, DataDir: t.TempDir(), InitialCluster: map[uint64]string{1: addr},
		Transport: tr, TableMem: 1 << 20, TickInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	wait.For(t, "a leader", func() bool { return s.node.Status().IsLeader })
	if err := s.Freeze(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	dialer, err := tcp.New(tcp.Config{Node: "dialer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dialer.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := dialer.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Send(ctx, peer.AppendHello(nil, peer.Hello{From: 2, Addr: "127.0.0.1:1"})); err != nil {
		t.Fatal(err)
	}
	time.Sleep(8 * idle) // well within the freeze
	if n := refusedCount(s, tcp.ReasonIdle); n != 0 {
		t.Fatalf("the frozen node closed %d idle connections; a peer's, whose hello arrived, must be exempt", n)
	}
}

func TestConfigMaxConnections(t *testing.T) {
	t.Parallel()
	base := Config{Listen: "x", DataDir: "d", Transport: limitless{}}
	if err := base.Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	if c := base.withDefaults(); c.MaxConnections != DefaultMaxConnections {
		t.Fatalf("default MaxConnections %d; want %d", c.MaxConnections, DefaultMaxConnections)
	}
	c := base
	c.MaxConnections = -1
	if err := c.Validate(); err == nil {
		t.Fatal("negative MaxConnections accepted")
	}
}

func TestConfigTableInline(t *testing.T) {
	t.Parallel()
	if n := table.InlineLen(32, 256); n > DefaultTableInline {
		t.Errorf("a 256-byte value under a 32-byte key takes %d inline bytes, more than the default %d", n, DefaultTableInline)
	}
	if got := (Config{}).withDefaults().tableConfig().InlineMax; got != DefaultTableInline {
		t.Errorf("default InlineMax %d, want %d", got, DefaultTableInline)
	}
	if got := (Config{TableInline: TableInlineOff}).withDefaults().tableConfig().InlineMax; got != 0 {
		t.Errorf("TableInlineOff: InlineMax %d, want 0 (no arenas)", got)
	}
	for _, tc := range []struct {
		inline int
		grace  time.Duration
		ok     bool
	}{
		{0, 0, true}, // DefaultTableInline
		{TableInlineOff, 0, true},
		{TableInlineOff, 2 * time.Second, true}, // ignored without arenas
		{-2, 0, false},
		{144, 0, true},
		{352, 50 * time.Millisecond, true},
		{100, 0, false},                 // not a multiple of 8
		{table.MaxInline + 8, 0, false}, // longer than an inline word can name
		{144, 2 * time.Second, false},   // longer than ReuseGrace
		{144, time.Microsecond, false},  // under 1ms
	} {
		c := Config{Listen: "x", DataDir: "d", Transport: limitless{}, TableInline: tc.inline, TableInlineGrace: tc.grace}
		err := c.Validate()
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, table.ErrBadConfig) {
			t.Errorf("TableInline %d, grace %v: Validate() = %v", tc.inline, tc.grace, err)
		}
	}
}

// TestWatchSlowReaderReleasesConn: a client opens a watch, reads nothing
// more, and keeps sending watch requests (cancels). The watch goroutine
// waits on the event's send while the requests fill the connection's
// queue; when the send times out, it closes the connection as a slow
// reader and exits. serveConn, blocked handing it the next request, must
// return too, or it would wait until the server stopped, holding its
// goroutine and the connection's place in kvd_connections.
func TestWatchSlowReaderReleasesConn(t *testing.T) {
	s, ctx, conn := stuckWatch(t, 300*time.Millisecond)
	for i := range watchCmdQueue + 2 { // the queue, full, and one more that blocks serveConn
		if err := conn.Send(ctx, wire.AppendRequest(nil, &wire.Request{Op: wire.OpWatchCancel, ID: uint64(100 + i),
			Value: wire.AppendWatchCancel(nil, 999)})); err != nil {
			break // the server closed the connection: fine
		}
	}
	wait.For(t, "the slow reader closed", func() bool { return refusedCount(s, transport.ReasonSlowReader) == 1 })
	wait.For(t, "serveConn to let the connection go", func() bool { return s.connCount() == 0 })
}

// TestWatchQueueChargedToBudget: a client whose watch goroutine is stuck
// on a send (it reads nothing) and which goes on sending watch requests of
// a MiB each (invalid: a watch request's value is 8 bytes) holds at most
// its budget (maxConnBytes) in queued requests, beside what its transport
// holds unread (tcp.DefaultQueueBytes). A queue bounded by count alone
// would take watchCmdQueue of them whatever their size (64 MiB here;
// 256 MiB at the largest message) while the send waited out replyTimeout.
func TestWatchQueueChargedToBudget(t *testing.T) {
	skipShort(t)
	s, ctx, conn := stuckWatch(t, 5*time.Second)
	frame := wire.AppendRequest(nil, &wire.Request{Op: wire.OpWatch, ID: 2, Key: []byte("k"), Value: make([]byte, 1<<20)})
	base := heapNow()
	var sent atomic.Int64
	go func() {
		for range 2 * watchCmdQueue {
			if conn.Send(ctx, frame) != nil {
				return
			}
			sent.Add(1)
		}
	}()
	// Until the sender stalls: the server stopped taking requests.
	for last := int64(-1); sent.Load() != last; time.Sleep(500 * time.Millisecond) {
		last = sent.Load()
	}
	held := heapNow() - base
	t.Logf("%d requests of 1 MiB sent; the server holds %.1f MiB", sent.Load(), float64(held)/(1<<20))
	if limit := int64(maxConnBytes + tcp.DefaultQueueBytes + 4<<20); held > limit {
		t.Errorf("a client stuck on a watch send made the server hold %.1f MiB of watch requests; want at most %d MiB",
			float64(held)/(1<<20), limit>>20)
	}
	wait.For(t, "the slow reader closed", func() bool { return refusedCount(s, transport.ReasonSlowReader) == 1 })
	wait.For(t, "serveConn to let the connection go", func() bool { return s.connCount() == 0 })
}

// stuckWatch starts a server and a client connection with a watch on "k"
// whose goroutine waits to send the event of a PUT: the client takes one
// message (the watch's created) and reads nothing.
func stuckWatch(t *testing.T, replyTimeout time.Duration) (*Server, context.Context, transport.Conn) {
	t.Helper()
	s := floodServer(t, Config{Knobs: Knobs{ReplyTimeout: replyTimeout}}, tcp.Config{})
	ctx, conn := rawClient(t, s, tcp.Config{Credits: 1})
	openWatch(t, ctx, conn, "k")
	created := s.metrics.requests.WithLabelValues(wire.OpWatch.String(), statusName(wire.StatusOK))
	wait.For(t, "the watch created", func() bool { return testutil.ToFloat64(created) == 1 })
	if resp := s.put(context.Background(), []byte("k"), []byte("v")); resp.Status != wire.StatusOK {
		t.Fatalf("put: %+v", resp)
	}
	return s, ctx, conn
}

// TestWatchMessageTooLargeClosesConn: a watch message larger than the
// client's transport accepts cannot be sent; the connection's watch
// goroutine ends, so the connection is closed with it (before, the client
// was left waiting on watches no one served).
func TestWatchMessageTooLargeClosesConn(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	ctx, conn := rawClient(t, s, tcp.Config{MaxMessage: 512})
	openWatch(t, ctx, conn, "k")
	if _, err := conn.Recv(ctx, nil); err != nil { // created
		t.Fatal(err)
	}
	if resp := s.put(context.Background(), []byte("k"), bytes.Repeat([]byte("v"), 1000)); resp.Status != wire.StatusOK {
		t.Fatalf("put: %+v", resp)
	}
	for {
		if _, err := conn.Recv(ctx, nil); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("the connection was left open: %v", err)
			}
			break
		}
	}
	wait.For(t, "the connection gone", func() bool { return s.connCount() == 0 })
}

// rawClient dials s over a tcp transport made with tcfg, as a client that
// speaks the wire protocol by hand; the connection and the context (20 s)
// end with the test.
func rawClient(t *testing.T, s *Server, tcfg tcp.Config) (context.Context, transport.Conn) {
	t.Helper()
	tr, err := tcp.New(tcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	conn, err := tr.Dial(ctx, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ctx, conn
}

// openWatch sends a watch request for key, id 1, from now.
func openWatch(t *testing.T, ctx context.Context, conn transport.Conn, key string) {
	t.Helper()
	if err := conn.Send(ctx, wire.AppendRequest(nil, &wire.Request{Op: wire.OpWatch, ID: 1, Key: []byte(key),
		Value: wire.AppendWatchRequest(nil, 0)})); err != nil {
		t.Fatal(err)
	}
}
