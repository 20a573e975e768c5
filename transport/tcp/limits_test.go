package tcp

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/transport"
)

// Every limit of the transport, each shown to hold against a
// hostile peer while legitimate ones are still served.

// refusals records what a listener's refusal hook hears.
type refusals struct {
	mu   sync.Mutex
	seen map[string]int
	errs []error
	hear chan string
}

func hookOn(t *testing.T, ln transport.Listener) *refusals {
	t.Helper()
	r := &refusals{seen: map[string]int{}, hear: make(chan string, 1024)}
	ln.(Limits).SetRefusalHook(func(reason, remote string, err error) {
		r.mu.Lock()
		r.seen[reason]++
		r.errs = append(r.errs, err)
		r.mu.Unlock()
		select {
		case r.hear <- reason:
		default:
		}
	})
	return r
}

// wait waits for the hook to hear reason, failing after d.
func (r *refusals) wait(t *testing.T, reason string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case got := <-r.hear:
			if got == reason {
				return
			}
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("refusal hook did not hear %q within %v; heard %v", reason, d, r.seen)
		}
	}
}

func (r *refusals) count(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[reason]
}

func listen(t *testing.T, cfg Config) (*Transport, transport.Listener) {
	t.Helper()
	tr := newTestTransport(t, cfg)
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return tr, ln
}

// roundTrip checks that a fresh client can still connect and be served:
// it sends a message that the listener's side echoes.
func roundTrip(t *testing.T, ln transport.Listener) {
	t.Helper()
	ctx := testCtx(t)
	cli := newTestTransport(t, Config{})
	accepted := make(chan transport.Conn, 1)
	go func() {
		s, err := ln.Accept(ctx)
		if err != nil {
			close(accepted)
			return
		}
		accepted <- s
	}()
	c, err := cli.Dial(ctx, ln.Addr())
	if err != nil {
		t.Fatalf("a legitimate client cannot connect: %v", err)
	}
	defer c.Close()
	s := <-accepted
	if s == nil {
		t.Fatal("Accept failed")
	}
	defer s.Close()
	if err := c.Send(ctx, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	msg, err := s.Recv(ctx, nil)
	if err != nil || string(msg) != "ping" {
		t.Fatalf("legitimate client: Recv = %q, %v", msg, err)
	}
}

// heapNow is the live heap after a full collection.
func heapNow() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// idleConnHeap opens n raw connections to a fresh listener, lets the
// transport accept them, and returns the heap, goroutine stacks and
// goroutines each costs the listener's side.
func idleConnHeap(t *testing.T, cfg Config, n int, tcfg *tls.Config) (heap, stack, goroutines float64) {
	_, ln := listen(t, cfg)
	ctx := testCtx(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	for range n {
		if tcfg == nil {
			dialRaw(t, ln.Addr(), okHello())
		} else {
			tc, err := tls.Dial("tcp", ln.Addr(), tcfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tc.Close() })
			tc.Write(okHello().marshal())
			if _, err := readHello(tc); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ln.Accept(ctx); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n),
		float64(int64(after.StackInuse)-int64(before.StackInuse)) / float64(n),
		float64(g1-g0) / float64(n)
}

// maxIdleHeap is the acceptance bound on the heap an idle accepted
// connection costs.
const maxIdleHeap = 64 << 10

func TestIdleConnMemory(t *testing.T) {
	const n = 500
	heap, stack, g := idleConnHeap(t, Config{}, n, nil)
	t.Logf("per idle accepted connection: heap %.1f KiB, goroutine stacks %.1f KiB, %.2f goroutines", heap/1024, stack/1024, g)
	if heap > maxIdleHeap {
		t.Errorf("an idle connection costs %.1f KiB of heap; want at most %d KiB", heap/1024, maxIdleHeap>>10)
	}
	// Over TLS, crypto/tls keeps its own buffers per connection (and the
	// raw TLS dialers' state counts here too): reported, not bounded.
	pki := newTestPKI(t)
	lcfg := pki.mutual()
	heap, _, _ = idleConnHeap(t, Config{TLS: lcfg.config()}, n/5, &tls.Config{
		RootCAs: pki.clientCA.Pool(), Certificates: []tls.Certificate{pki.client.TLS},
		NextProtos: []string{alpnClient}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	t.Logf("per idle accepted TLS connection (dialer's TLS state included): heap %.1f KiB", heap/1024)
}

func TestMaxConns(t *testing.T) {
	_, ln := listen(t, Config{MaxConns: 3})
	heard := hookOn(t, ln)
	ctx := testCtx(t)
	cli := newTestTransport(t, Config{})
	var conns []transport.Conn
	for range 3 {
		c, err := cli.Dial(ctx, ln.Addr())
		if err != nil {
			t.Fatalf("Dial within MaxConns: %v", err)
		}
		conns = append(conns, c)
	}
	// Accepted or not, the three count: the fourth is refused, and says so.
	_, err := cli.Dial(ctx, ln.Addr())
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "MaxConns") {
		t.Fatalf("Dial beyond MaxConns = %v; want ErrRefused naming the limit", err)
	}
	t.Logf("refused dialer sees: %v", err)
	heard.wait(t, ReasonMaxConns, 5*time.Second)
	// Over TLS the refusal comes before the TLS handshake, and reads the same.
	pki := newTestPKI(t)
	tlsCli := newTestTransport(t, Config{TLS: dialTLS(transport.RoleClient, pki.clientCA, pki.client)})
	if _, err := tlsCli.Dial(ctx, ln.Addr()); !errors.Is(err, ErrRefused) {
		t.Fatalf("TLS Dial beyond MaxConns = %v; want ErrRefused", err)
	}
	// Closing one (from either end) makes room.
	conns[0].Close()
	wait.For(t, "the closed connection to leave the listener's count", func() bool {
		return ln.(*listener).open.Load() == 2
	})
	c, err := cli.Dial(ctx, ln.Addr())
	if err != nil {
		t.Fatalf("Dial after one closed: %v", err)
	}
	conns = append(conns, c)
	// A server may raise the cap after Listen.
	ln.(Limits).SetMaxConns(5)
	if _, err := cli.Dial(ctx, ln.Addr()); err != nil {
		t.Fatalf("Dial after SetMaxConns(5): %v", err)
	}
}

// TestHandshakeTimeout: a dialer that connects and says nothing is dropped
// after HandshakeTimeout, and counted.
func TestHandshakeTimeout(t *testing.T) {
	_, ln := listen(t, Config{HandshakeTimeout: 100 * time.Millisecond, MaxConns: 2})
	heard := hookOn(t, ln)
	var silent []net.Conn
	for range 2 {
		nc, err := net.Dial("tcp", ln.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		silent = append(silent, nc)
	}
	start := time.Now()
	for _, nc := range silent {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		// The listener's hello, then EOF.
		if _, err := io.Copy(io.Discard, nc); err != nil {
			t.Fatalf("silent dialer: %v; want EOF", err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("silent dialers dropped after %v", d)
	}
	heard.wait(t, ReasonHandshake, 5*time.Second)
	// Both slots are free again for legitimate clients.
	roundTrip(t, ln)
	roundTrip(t, ln)
}

// TestTLSHandshakeTimeout: a TLS dialer that completes the TLS handshake
// and then sends no hello is dropped after HandshakeTimeout. Under -race
// it also checks that the timeout's callback does not read the connection
// variable the handshake replaces with the TLS one.
func TestTLSHandshakeTimeout(t *testing.T) {
	p := newTestPKI(t)
	_, ln := listen(t, Config{HandshakeTimeout: 200 * time.Millisecond,
		TLS: listenTLS{serverCert: p.server, peerCert: p.peer}.config()})
	raw, err := net.Dial("tcp", ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	tc := tls.Client(raw, &tls.Config{RootCAs: p.clientCA.Pool(), ServerName: "127.0.0.1",
		NextProtos: []string{alpnClient}, MinVersion: tls.VersionTLS13})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	// Say nothing; the listener's hello, then EOF after HandshakeTimeout.
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, tc); err != nil {
		t.Fatalf("silent TLS dialer: %v; want EOF", err)
	}
}

// TestIdleTimeout: an accepted connection on which nothing arrives is
// closed after IdleTimeout; one that keeps talking, or whose timeout was
// lifted (SetIdleTimeout, as for a server's peers), is not; dialed
// connections have none.
func TestIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	tr, ln := listen(t, Config{IdleTimeout: idle})
	heard := hookOn(t, ln)
	ctx := testCtx(t)
	cli := newTestTransport(t, Config{})
	dial := func() (c, s transport.Conn) {
		c, err := cli.Dial(ctx, ln.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if s, err = ln.Accept(ctx); err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	silentC, silentS := dial()
	chattyC, chattyS := dial()
	exemptC, exemptS := dial()
	exemptS.(IdleTimeouter).SetIdleTimeout(0)
	// The listener's transport dials too: its dialed end has no idle timeout.
	peerLn, err := cli.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dialed, err := tr.Dial(ctx, peerLn.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peerLn.Accept(ctx); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var talker sync.WaitGroup
	talker.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(idle / 4):
			}
			if chattyC.Send(ctx, []byte("still here")) != nil {
				return
			}
			if _, err := chattyS.Recv(ctx, nil); err != nil {
				return
			}
		}
	})
	_, err = silentS.Recv(ctx, nil)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("silent connection: Recv = %v; want ErrTimeout and ErrClosed", err)
	}
	heard.wait(t, ReasonIdle, 5*time.Second)
	if _, err := silentC.Recv(ctx, nil); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("silent connection, client end: Recv = %v; want ErrClosed", err)
	}
	time.Sleep(3 * idle)
	close(stop)
	talker.Wait()
	for name, c := range map[string]transport.Conn{"chatty": chattyS, "exempt": exemptS, "dialed": dialed} {
		if err := c.(*conn).usable(ctx); err != nil {
			t.Errorf("%s connection closed: %v", name, err)
		}
	}
	if err := exemptC.Send(ctx, []byte("x")); err != nil {
		t.Errorf("exempt connection: %v", err)
	}
	if n := heard.count(ReasonIdle); n != 1 {
		t.Errorf("%d idle closures reported; want 1", n)
	}
}

// TestHalfSentFrames: peers that announce the largest message and stall
// one byte short hold memory only for what they sent, and only for
// ReadTimeout; a legitimate client is served meanwhile.
func TestHalfSentFrames(t *testing.T) {
	const (
		n       = 50
		sent    = 4 << 10
		timeout = 500 * time.Millisecond
	)
	_, ln := listen(t, Config{ReadTimeout: timeout})
	heard := hookOn(t, ln)
	ctx := testCtx(t)
	h := okHello()
	h.maxMessage = transport.DefaultMaxMessage
	base := heapNow()
	var raws []net.Conn
	for range n {
		nc, _ := dialRaw(t, ln.Addr(), h)
		if _, err := ln.Accept(ctx); err != nil {
			t.Fatal(err)
		}
		hdr := frame(header{typ: frameMsg, length: transport.DefaultMaxMessage}, make([]byte, sent))
		if _, err := nc.Write(hdr); err != nil {
			t.Fatal(err)
		}
		raws = append(raws, nc)
	}
	time.Sleep(timeout / 5)
	per := float64(int64(heapNow())-int64(base)) / n
	t.Logf("per connection holding a %d MiB frame %d KiB in: heap %.1f KiB", transport.DefaultMaxMessage>>20, sent>>10, per/1024)
	if per > 256<<10 {
		t.Errorf("a half-sent frame costs %.0f KiB of heap; want well under the %d MiB it announced", per/1024, transport.DefaultMaxMessage>>20)
	}
	roundTrip(t, ln) // served alongside
	heard.wait(t, ReasonRead, 10*time.Second)
	for _, nc := range raws {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, nc); err != nil {
			t.Fatalf("stalled peer: %v; want EOF (closed)", err)
		}
	}
	wait.For(t, "every stalled connection to be reported", func() bool { return heard.count(ReasonRead) == n })
	if after := heapNow(); after > base+n*(32<<10) {
		t.Errorf("heap %d KiB above the start after the stalled connections closed", (after-base)>>10)
	}
}

// TestFrameBufferGrowsAsPayloadArrives: a message larger than keepMsgBuf is
// delivered whole though its buffer grows in steps.
func TestFrameBufferGrowsAsPayloadArrives(t *testing.T) {
	_, c, nc := rawPair(t, Config{}, okHello())
	msg := make([]byte, 700<<10+3)
	fillBytes(msg)
	b := frame(header{typ: frameMsg, length: uint64(len(msg))}, msg)
	go func() {
		for len(b) > 0 { // in uneven pieces
			k := min(len(b), 10007)
			nc.Write(b[:k])
			b = b[k:]
		}
	}()
	got, err := c.Recv(testCtx(t), nil)
	if err != nil || string(got) != string(msg) {
		t.Fatalf("Recv: %d bytes, %v; want the %d sent", len(got), err, len(msg))
	}
}

// TestWriteTimeout: a peer that never reads makes Send block once the
// socket's buffers are full; after WriteTimeout the connection is closed and
// the blocked Send fails, instead of pinning its message forever.
func TestWriteTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	h := okHello()
	h.credits, h.maxMessage = maxCredits, 1<<20
	_, ln := listen(t, Config{WriteTimeout: timeout})
	heard := hookOn(t, ln)
	nc, _ := dialRaw(t, ln.Addr(), h)
	ctx := testCtx(t)
	s, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 1<<20)
	start := time.Now()
	var sent int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if err = s.Send(ctx, msg); err != nil {
				return
			}
			sent++
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		nc.Close() // unblocks the Send
		<-done
		t.Fatalf("Send to a peer that reads nothing still blocked after 10s (WriteTimeout %v); %v", timeout, err)
	}
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send to a peer that reads nothing = %v after %d MiB; want ErrTimeout and ErrClosed", err, sent)
	}
	t.Logf("%d MiB went into the socket; the connection closed %v after the first Send", sent, time.Since(start).Round(time.Millisecond))
	heard.wait(t, ReasonWrite, 5*time.Second)
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, nc); err != nil {
		t.Fatalf("peer that read nothing: %v; want EOF (closed)", err)
	}
	roundTrip(t, ln)
}

// TestReadBatchTooLarge: a READ batch over transport.MaxReadBatchBytes is
// refused before it is posted; a raw peer that posts one anyway (272 bytes
// asking for a gigabyte) gets no data, only a closed connection.
func TestReadBatchTooLarge(t *testing.T) {
	tr, ln := listen(t, Config{})
	heard := hookOn(t, ln)
	r, err := tr.Register(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	d := r.Descriptor()
	nc, _ := dialRaw(t, ln.Addr(), okHello())
	ctx := testCtx(t)
	if _, err := ln.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	var all []wireOp
	for range transport.MaxBatch {
		all = append(all, wireOp{addr: d.Addr, n: 64 << 20, key: d.Key})
	}
	req := frame(header{typ: frameReadReq, a: transport.MaxBatch, length: transport.MaxBatch * opSize}, ops(all...))
	if len(req) != 272 {
		t.Fatalf("request of %d bytes", len(req))
	}
	if _, err := nc.Write(req); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.Copy(io.Discard, nc)
	if err != nil || got != 0 {
		t.Fatalf("peer asking for 1 GiB got %d bytes, %v; want none and EOF", got, err)
	}
	heard.wait(t, ReasonReadTooLarge, 5*time.Second)

	// The transport's own Read refuses such a batch before posting it.
	cli := newTestTransport(t, Config{})
	c, err := cli.Dial(ctx, ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	big := []transport.ReadOp{{Remote: d, Dst: make([]byte, transport.MaxReadBatchBytes+1)}}
	if err := c.Read(ctx, big); !errors.Is(err, transport.ErrBatchTooLarge) {
		t.Fatalf("Read of MaxReadBatchBytes+1 = %v; want ErrBatchTooLarge", err)
	}
	if err := c.Read(ctx, []transport.ReadOp{{Remote: d, Dst: big[0].Dst[:transport.MaxReadBatchBytes]}}); err != nil {
		t.Fatalf("Read of MaxReadBatchBytes: %v", err)
	}
}

// TestProtocolViolationReported: a listener reports a peer that breaks the
// protocol.
func TestProtocolViolationReported(t *testing.T) {
	_, ln := listen(t, Config{})
	heard := hookOn(t, ln)
	nc, _ := dialRaw(t, ln.Addr(), okHello())
	if _, err := ln.Accept(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(frame(header{typ: 9}, nil)); err != nil {
		t.Fatal(err)
	}
	heard.wait(t, ReasonProtocol, 5*time.Second)
}

// TestWatchTick: the watchdog ticks often enough for the shortest timeout.
func TestWatchTick(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{}.withDefaults(), time.Second},
		{Config{IdleTimeout: -1, ReadTimeout: -1, WriteTimeout: -1}, time.Second},
		{Config{IdleTimeout: 800 * time.Millisecond, ReadTimeout: time.Hour}, 100 * time.Millisecond},
		{Config{WriteTimeout: time.Millisecond}, 5 * time.Millisecond},
	} {
		if got := watchTick(tt.cfg); got != tt.want {
			t.Errorf("watchTick(%+v) = %v, want %v", tt.cfg, got, tt.want)
		}
	}
}

// TestDialedWriteTimeoutReported: a node's raft traffic goes out on
// connections it dialed. A peer that takes no bytes for WriteTimeout gets
// the connection closed; kvd documents that every such close is counted in
// kvd_connections_refused_total{reason="write_timeout"} ("a peer taking no
// bytes for 10s"), which the server learns from its listener's refusal
// hook. The close of a dialed connection must reach that hook too.
func TestDialedWriteTimeoutReported(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tr, ln := listen(t, Config{WriteTimeout: timeout})
	heard := hookOn(t, ln)

	// A raw peer that answers the hello, grants every credit, and then
	// reads nothing (a stopped process, a black-holed network).
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := rl.Accept()
		if err != nil {
			return
		}
		if _, err := readHello(nc); err != nil {
			nc.Close()
			return
		}
		h := okHello()
		h.credits, h.maxMessage = maxCredits, 1<<20
		nc.Write(h.marshal())
		accepted <- nc
	}()
	ctx := testCtx(t)
	c, err := tr.Dial(ctx, rl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc := <-accepted
	t.Cleanup(func() { nc.Close() })
	msg := make([]byte, 1<<20)
	for err == nil {
		err = c.Send(ctx, msg)
	}
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Send to a peer that reads nothing = %v; want ErrTimeout", err)
	}
	heard.wait(t, ReasonWrite, 5*time.Second)
}
