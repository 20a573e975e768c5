//go:build rdma

package rdma

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/transporttest"
)

// These tests need an RDMA device; scripts/rdmavm/test-rdma.sh runs them on
// Soft-RoCE in a VM. Elsewhere they skip, except under RDMAVM=1, where a
// missing device is a failure.

func testAddr() string {
	if a := os.Getenv("RDMAVM_ADDR"); a != "" {
		return a + ":0"
	}
	return "10.77.0.1:0"
}

func newTransport(t testing.TB, cfg Config) *Transport {
	t.Helper()
	tr, err := New(cfg)
	if errors.Is(err, ErrNoDevice) && os.Getenv("RDMAVM") == "" {
		t.Skipf("no RDMA device: %v", err)
	}
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// pair returns a connection from a client transport to a server transport
// and its accepted end.
func pair(t testing.TB, cfg Config) (client, server transport.Conn, ct, st *Transport) {
	t.Helper()
	st = newTransport(t, cfg)
	ct = newTransport(t, cfg)
	l, err := st.Listen(testAddr())
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err = ct.Dial(ctx, l.Addr())
	if err != nil {
		t.Fatalf("Dial %s: %v", l.Addr(), err)
	}
	server, err = l.Accept(ctx)
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server, ct, st
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
	return b
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSendRecvSizes(t *testing.T) {
	cfg := Config{BufSize: 4096}
	c, s, _, _ := pair(t, cfg)
	frag := cfg.BufSize - headerSize
	sizes := []struct {
		name string
		n    int
	}{
		{"empty", 0}, {"one", 1}, {"one fragment", frag}, {"two fragments", frag + 1},
		{"many fragments", 100*frag + 17}, {"max", transport.DefaultMaxMessage},
	}
	ctx := ctxT(t)
	for i, tc := range sizes {
		t.Run(tc.name, func(t *testing.T) {
			msg := pattern(tc.n, i)
			if err := c.Send(ctx, msg); err != nil {
				t.Fatalf("Send: %v", err)
			}
			got, err := s.Recv(ctx, nil)
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			if !bytes.Equal(got, msg) {
				t.Fatalf("got %d bytes, want %d (equal prefix %v)", len(got), len(msg), bytes.HasPrefix(msg, got))
			}
		})
	}
	if c.MaxMessage() != transport.DefaultMaxMessage {
		t.Errorf("MaxMessage = %d", c.MaxMessage())
	}
	if err := c.Send(ctx, make([]byte, c.MaxMessage()+1)); !errors.Is(err, transport.ErrMessageTooLarge) {
		t.Errorf("oversized Send = %v, want ErrMessageTooLarge", err)
	}
}

func TestRecvReusesBuffer(t *testing.T) {
	c, s, _, _ := pair(t, Config{})
	ctx := ctxT(t)
	buf := make([]byte, 0, 64)
	if err := c.Send(ctx, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Recv(ctx, buf)
	if err != nil || string(got) != "hello" || &got[0] != &buf[:1][0] {
		t.Fatalf("Recv = %q, %v; want hello in the caller's buffer", got, err)
	}
}

func TestCreditsBlockSender(t *testing.T) {
	cfg := Config{Credits: 4, RecvBuffers: 4}
	c, s, _, _ := pair(t, cfg)
	ctx := ctxT(t)
	for i := range cfg.Credits {
		if err := c.Send(ctx, []byte{byte(i)}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c.Send(short, []byte{99}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send beyond credits = %v, want DeadlineExceeded", err)
	}
	sent := make(chan error, 1)
	go func() { sent <- c.Send(ctx, []byte{100}) }()
	for i := range cfg.Credits {
		got, err := s.Recv(ctx, nil)
		if err != nil || len(got) != 1 || got[0] != byte(i) {
			t.Fatalf("Recv %d = %v, %v", i, got, err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("Send after Recv freed a credit: %v", err)
	}
	if got, err := s.Recv(ctx, nil); err != nil || got[0] != 100 {
		t.Fatalf("last Recv = %v, %v", got, err)
	}
}

// TestConcurrentStreams has several goroutines on each side send numbered
// messages of mixed sizes both ways at once; each receiver checks every
// sender's sequence arrives whole and in order.
func TestConcurrentStreams(t *testing.T) {
	cfg := Config{BufSize: 1024, Credits: 8, RecvBuffers: 12, SendBuffers: 4}
	c, s, _, _ := pair(t, cfg)
	ctx := ctxT(t)
	const senders, perSender = 4, 300
	sizes := []int{0, 5, 1000, 1008, 1009, 5000, 40000}
	var wg sync.WaitGroup
	errs := make(chan error, 4*senders)
	for _, dir := range []struct{ from, to transport.Conn }{{c, s}, {s, c}} {
		for g := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perSender {
					n := sizes[(i+g)%len(sizes)]
					msg := pattern(n+4, i)
					msg[0], msg[1], msg[2] = byte(g), byte(i), byte(i>>8)
					if err := dir.from.Send(ctx, msg); err != nil {
						errs <- fmt.Errorf("send %d/%d: %w", g, i, err)
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := make([]int, senders)
			var buf []byte
			for range senders * perSender {
				var err error
				buf, err = dir.to.Recv(ctx, buf)
				if err != nil {
					errs <- fmt.Errorf("recv: %w", err)
					return
				}
				g, i := int(buf[0]), int(buf[1])|int(buf[2])<<8
				n := sizes[(i+g)%len(sizes)]
				want := pattern(n+4, i)
				want[0], want[1], want[2] = buf[0], buf[1], buf[2]
				if g >= senders || i != next[g] || !bytes.Equal(buf, want) {
					errs <- fmt.Errorf("sender %d: got message %d (%d bytes), want %d", g, i, len(buf), next[g])
					return
				}
				next[g]++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func newRegion(t testing.TB, tr *Transport, n int) transport.Region {
	t.Helper()
	r, err := tr.Register(n)
	if err != nil {
		t.Fatalf("Register(%d): %v", n, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	copy(r.Bytes(), pattern(n, 3))
	return r
}

func TestReadBatches(t *testing.T) {
	cfg := Config{ReadSlotSize: 4096, ReadSlots: 2}
	c, _, _, st := pair(t, cfg)
	r := newRegion(t, st, 1<<20)
	d, mem := r.Descriptor(), r.Bytes()
	if d.Len != 1<<20 || d.Addr == 0 {
		t.Fatalf("descriptor %v", d)
	}
	cases := []struct {
		name string
		ops  [][2]int // offset, length
	}{
		{"one small", [][2]int{{0, 8}}},
		{"header and two buckets", [][2]int{{0, 64}, {4096, 64}, {8192, 64}}},
		{"empty op", [][2]int{{10, 0}, {20, 5}}},
		{"slot sized", [][2]int{{100, 4096}}},
		{"larger than slot", [][2]int{{1, 10000}, {50000, 3}}},
		{"full batch", func() (o [][2]int) {
			for i := range transport.MaxBatch {
				o = append(o, [2]int{i * 333, 100 + i})
			}
			return
		}()},
		{"whole region", [][2]int{{0, 1 << 20}}},
		{"last byte", [][2]int{{1<<20 - 1, 1}}},
	}
	ctx := ctxT(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := make([]transport.ReadOp, len(tc.ops))
			for i, o := range tc.ops {
				ops[i] = transport.ReadOp{Remote: d, Offset: uint64(o[0]), Dst: make([]byte, o[1])}
			}
			if err := c.Read(ctx, ops); err != nil {
				t.Fatalf("Read: %v", err)
			}
			for i, o := range tc.ops {
				if !bytes.Equal(ops[i].Dst, mem[o[0]:o[0]+o[1]]) {
					t.Fatalf("op %d (%d+%d): wrong bytes", i, o[0], o[1])
				}
			}
		})
	}
	// The owner's writes are visible to later READs.
	copy(mem[64:], "fresh")
	op := []transport.ReadOp{{Remote: d, Offset: 64, Dst: make([]byte, 5)}}
	if err := c.Read(ctx, op); err != nil || string(op[0].Dst) != "fresh" {
		t.Fatalf("Read after write = %q, %v", op[0].Dst, err)
	}
}

func TestReadErrorsKeepConn(t *testing.T) {
	c, _, _, st := pair(t, Config{})
	r := newRegion(t, st, 4096)
	d := r.Descriptor()
	ctx := ctxT(t)
	cases := []struct {
		name string
		ops  []transport.ReadOp
		want error
	}{
		{"past end", []transport.ReadOp{{Remote: d, Offset: 4000, Dst: make([]byte, 97)}}, transport.ErrOutOfRange},
		{"offset past end", []transport.ReadOp{{Remote: d, Offset: 1 << 40, Dst: make([]byte, 1)}}, transport.ErrOutOfRange},
		{"too many", make([]transport.ReadOp, transport.MaxBatch+1), transport.ErrBatchTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Read(ctx, tc.ops); !errors.Is(err, tc.want) {
				t.Fatalf("Read = %v, want %v", err, tc.want)
			}
		})
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Read(done, []transport.ReadOp{{Remote: d, Dst: make([]byte, 8)}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with cancelled ctx = %v", err)
	}
	op := []transport.ReadOp{{Remote: d, Offset: 4088, Dst: make([]byte, 8)}}
	if err := c.Read(ctx, op); err != nil {
		t.Fatalf("Read after errors: %v", err)
	}
}

// A READ the peer's device refuses breaks the queue pair: that Read reports
// ErrBadKey, and the connection is closed on both sides.
func TestReadBadKey(t *testing.T) {
	c, s, _, st := pair(t, Config{})
	ctx := ctxT(t)
	r := newRegion(t, st, 4096)
	d := r.Descriptor()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	err := c.Read(ctx, []transport.ReadOp{{Remote: d, Dst: make([]byte, 8)}})
	if !errors.Is(err, transport.ErrBadKey) {
		t.Fatalf("Read of closed region = %v, want ErrBadKey", err)
	}
	if err := c.Send(ctx, []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send after QP error = %v, want ErrClosed", err)
	}
	if _, err := s.Recv(ctx, nil); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("peer Recv = %v, want ErrClosed", err)
	}
}

func TestConcurrentReads(t *testing.T) {
	c, _, _, st := pair(t, Config{ReadSlots: 2})
	r := newRegion(t, st, 64<<10)
	d, mem := r.Descriptor(), r.Bytes()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				off := (g*977 + i*131) % (60 << 10)
				ops := []transport.ReadOp{
					{Remote: d, Offset: uint64(off), Dst: make([]byte, 64)},
					{Remote: d, Offset: uint64(off / 2), Dst: make([]byte, 300)},
				}
				if err := c.Read(ctx, ops); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(ops[0].Dst, mem[off:off+64]) || !bytes.Equal(ops[1].Dst, mem[off/2:off/2+300]) {
					errs <- fmt.Errorf("goroutine %d read %d: wrong bytes", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClose(t *testing.T) {
	c, s, _, _ := pair(t, Config{})
	ctx := ctxT(t)
	pending := make(chan error, 1)
	go func() { _, err := c.Recv(ctx, nil); pending <- err }()
	for i := range 3 {
		if err := s.Send(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-pending; err != nil {
		t.Fatalf("Recv before close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Messages sent before the peer closed still arrive, then ErrClosed.
	for i := 1; i < 3; i++ {
		got, err := c.Recv(ctx, nil)
		if err != nil || got[0] != byte(i) {
			t.Fatalf("Recv %d after peer close = %v, %v", i, got, err)
		}
	}
	if _, err := c.Recv(ctx, nil); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Recv after peer close = %v, want ErrClosed", err)
	}
	if err := c.Send(ctx, nil); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send after peer close = %v, want ErrClosed", err)
	}
	if err := s.Send(ctx, nil); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Recv(ctx, nil); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Recv after Close = %v, want ErrClosed", err)
	}
}

func TestCloseWakesBlockedOps(t *testing.T) {
	c, _, _, _ := pair(t, Config{Credits: 1, RecvBuffers: 1})
	ctx := ctxT(t)
	if err := c.Send(ctx, []byte("fills the peer's queue")); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() { errs <- c.Send(ctx, []byte("blocks")) }()
	go func() { _, err := c.Recv(ctx, nil); errs <- err }()
	time.Sleep(50 * time.Millisecond) // let both block (the test holds either way)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("blocked op = %v, want ErrClosed", err)
		}
	}
}

func TestListenerAndTransportClose(t *testing.T) {
	st := newTransport(t, Config{})
	ct := newTransport(t, Config{})
	l, err := st.Listen(testAddr())
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	c, err := ct.Dial(ctx, l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() { _, err := l.Accept(ctx); accepted <- err }()
	if err := <-accepted; err != nil {
		t.Fatalf("Accept: %v", err)
	}
	go func() { _, err := l.Accept(ctx); accepted <- err }()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Accept after Close = %v", err)
	}
	if _, err := ct.Dial(ctx, l.Addr()); err == nil {
		t.Fatal("Dial to a closed listener succeeded")
	}
	if err := ct.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, nil); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send after transport Close = %v", err)
	}
	if _, err := ct.Dial(ctx, l.Addr()); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Dial on closed transport = %v", err)
	}
	if _, err := ct.Register(10); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Register on closed transport = %v", err)
	}
}

func TestBusyPoll(t *testing.T) {
	c, s, _, st := pair(t, Config{Poll: PollBusy})
	ctx := ctxT(t)
	r := newRegion(t, st, 4096)
	for i := range 100 {
		if err := c.Send(ctx, pattern(i*50, i)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Recv(ctx, nil)
		if err != nil || !bytes.Equal(got, pattern(i*50, i)) {
			t.Fatalf("Recv %d: %v", i, err)
		}
		op := []transport.ReadOp{{Remote: r.Descriptor(), Offset: uint64(i), Dst: make([]byte, 100)}}
		if err := c.Read(ctx, op); err != nil || !bytes.Equal(op[0].Dst, r.Bytes()[i:i+100]) {
			t.Fatalf("Read %d: %v", i, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"busy", Config{Poll: PollBusy}, true},
		{"bad poll", Config{Poll: 7}, false},
		{"spin", Config{SpinPoll: time.Microsecond}, true},
		{"no spin", Config{SpinPoll: -1}, true},
		{"long spin", Config{SpinPoll: time.Second}, false},
		{"tiny buffers", Config{BufSize: 16}, false},
		{"too many buffers", Config{RecvBuffers: maxBuffers}, false},
		{"negative credits", Config{Credits: -1}, false},
	}
	for _, tc := range cases {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%s: Validate = %v", tc.name, err)
		}
	}
}

// TestConformance runs the shared transport suite on RDMA: with the
// defaults (events with adaptive spinning), with small buffers (heavy
// fragmentation, few send buffers, tight credits, multi-round reads), with
// events and no spinning (every wait sleeps on the completion channel), and
// with busy polling. (Busy polling is not combined with small buffers: two
// spinning pollers on the VM's two CPUs under the race detector leave too
// little CPU for the suite's deadlines.)
func TestConformance(t *testing.T) {
	configs := []struct {
		name string
		cfg  Config
	}{
		{"defaults", Config{}},
		{"small buffers", Config{BufSize: 2048, Credits: 8, RecvBuffers: 10,
			SendBuffers: 8, ReadSlots: 2, ReadSlotSize: 8192}},
		{"no spin", Config{SpinPoll: -1}},
		// Every wait for a send buffer or a READ sleeps (poller.go,
		// "Arming").
		{"small buffers, no spin", Config{BufSize: 2048, Credits: 8, RecvBuffers: 10,
			SendBuffers: 8, ReadSlots: 2, ReadSlotSize: 8192, SpinPoll: -1}},
		{"busy poll", Config{Poll: PollBusy}},
	}
	for _, tc := range configs {
		t.Run(tc.name, func(t *testing.T) {
			transporttest.Run(t, transporttest.Factory{
				New: func(t *testing.T) (server, client transport.Transport, addr string) {
					return newTransport(t, tc.cfg), newTransport(t, tc.cfg), testAddr()
				},
				Credits: tc.cfg.withDefaults().Credits,
			})
		})
	}
}

// A Send that gives up before its first fragment leaves no trace: the
// message credit it took is returned and nothing reaches the peer.
func TestSendCanceledBeforeFirstFragment(t *testing.T) {
	cfg := Config{Credits: 3, RecvBuffers: 2}
	c, s, _, _ := pair(t, cfg)
	ctx := ctxT(t)
	for i := range 2 { // each held in one of the peer's two buffers
		if err := c.Send(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := c.Send(short, []byte{9}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send with no receive buffer = %v, want DeadlineExceeded", err)
	}
	for i := range 2 {
		if got, err := s.Recv(ctx, nil); err != nil || got[0] != byte(i) {
			t.Fatalf("Recv %d = %v, %v", i, got, err)
		}
	}
	cc := c.(*conn)
	for {
		cc.mu.Lock()
		msg, buf := cc.msgCredits, cc.bufCredits
		cc.mu.Unlock()
		if msg == cfg.Credits && buf == cfg.RecvBuffers {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("credits stuck at msg %d buf %d, want %d and %d", msg, buf, cfg.Credits, cfg.RecvBuffers)
		case <-time.After(time.Millisecond):
		}
	}
	quiet, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if got, err := s.Recv(quiet, nil); err == nil {
		t.Fatalf("the canceled message arrived: %v", got)
	}
}

// rawSend posts one SEND of header h and n payload bytes from c, bypassing
// Send's framing and credit accounting: a peer that breaks the protocol.
func rawSend(t *testing.T, c *conn, h header, n int) {
	t.Helper()
	var bufs [1]uint16
	if _, _, err := c.takeSendBuffers(ctxT(t), 1, bufs[:]); err != nil {
		t.Fatal(err)
	}
	c.memMu.RLock()
	defer c.memMu.RUnlock()
	b := c.sendBuf(int(bufs[0]))
	h.put(b)
	var sd [1]sendWR
	setSend(&sd[0], c.base+uint64(c.sendAt+int(bufs[0])*c.cfg.BufSize), headerSize+n, wrID(c.id, kindSend, 0, int(bufs[0])))
	if err := c.postSends(sd[:], bufs[:]); err != nil {
		t.Fatal(err)
	}
}

// A peer that breaks the protocol (a bogus total, fragments out of order,
// credits it never got) closes the connection with an error wrapping
// ErrProtocol and ErrClosed; the breaker sees the connection closed.
func TestProtocolViolations(t *testing.T) {
	cfg := Config{BufSize: 1024, MaxMessage: 4096}
	data := func(flags uint8, total uint32) header { return header{kind: msgData, flags: flags, total: total} }
	cases := []struct {
		name string
		h    header
		n    int
	}{
		{"total over MaxMessage", data(flagFirst, 1<<31), 100},
		{"total of a whole message", data(flagFirst|flagLast, 1<<20), 10},
		{"fragment without a first", data(flagLast, 0), 10},
		{"unknown kind", header{kind: 9}, 0},
		{"buffer credits never used", header{kind: msgCtl, retBuf: 2}, 0},
		{"message credits beyond the grant", header{kind: msgData, flags: flagFirst | flagLast, retMsg: 0xffff}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, s, _, _ := pair(t, cfg)
			ctx := ctxT(t)
			// Some honest traffic first: the receiver has used one buffer
			// and one message credit of the breaker, so returning one of
			// each would be right (rawSend drops what is really owed);
			// returning two is not.
			if err := s.Send(ctx, []byte("hi")); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Recv(ctx, nil); err != nil {
				t.Fatal(err)
			}
			rawSend(t, c.(*conn), tc.h, tc.n)
			_, err := s.Recv(ctx, nil)
			if !errors.Is(err, transport.ErrProtocol) || !errors.Is(err, transport.ErrClosed) {
				t.Fatalf("receiver's Recv = %v, want ErrProtocol and ErrClosed", err)
			}
			if err := s.Send(ctx, nil); !errors.Is(err, transport.ErrClosed) {
				t.Fatalf("receiver's Send = %v, want ErrClosed", err)
			}
			if _, err := c.Recv(ctx, nil); !errors.Is(err, transport.ErrClosed) {
				t.Fatalf("breaker's Recv = %v, want ErrClosed", err)
			}
		})
	}
}

// With adaptive spinning (the default) an idle transport still uses no CPU:
// every spin ends SpinPoll after the last completion. (Keepalives, one
// zero-length READ per idle connection per KeepAlive, are off here: this
// measures the spinning.)
func TestSpinPollIdle(t *testing.T) {
	c, s, _, st := pair(t, Config{KeepAlive: -1})
	r := newRegion(t, st, 4096)
	ctx := ctxT(t)
	op := []transport.ReadOp{{Remote: r.Descriptor(), Dst: make([]byte, 64)}}
	for i := range 200 {
		if err := c.Read(ctx, op); err != nil {
			t.Fatal(err)
		}
		if err := c.Send(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A receiver waiting with nothing to come spins once, then sleeps.
	go func() { _, _ = s.Recv(ctx, nil) }()
	time.Sleep(50 * time.Millisecond)
	const idle = 500 * time.Millisecond
	before := cpuTime()
	time.Sleep(idle)
	if used := cpuTime() - before; used > idle/10 {
		t.Fatalf("idle transports used %v of CPU in %v", used, idle)
	}
}
