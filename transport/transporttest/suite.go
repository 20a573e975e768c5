package transporttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// Factory makes the transports under test.
type Factory struct {
	// New returns two fresh transports and an address server can Listen on
	// (port 0 is fine: the suite dials the listener's Addr). The suite
	// closes both transports.
	New func(t *testing.T) (server, client transport.Transport, addr string)

	// Credits is the Credits setting both transports were made with; 0
	// means transport.DefaultCredits. The backpressure tests depend on it.
	Credits int
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, f Factory) {
	if f.Credits == 0 {
		f.Credits = transport.DefaultCredits
	}
	tests := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"Register", testRegister},
		{"MessagesInOrder", testMessagesInOrder},
		{"MessageSizes", testMessageSizes},
		{"RecvAppendsToBuf", testRecvAppendsToBuf},
		{"ConcurrentSendsAndReads", testConcurrentSendsAndReads},
		{"SeveralConns", testSeveralConns},
		{"Backpressure", testBackpressure},
		{"SendBatch", testSendBatch},
		{"RecvCanceled", testRecvCanceled},
		{"ReadBounds", testReadBounds},
		{"ReadBadKey", testReadBadKey},
		{"ReadBatch", testReadBatch},
		{"ReadBatchBytes", testReadBatchBytes},
		{"ReadBothWays", testReadBothWays},
		{"ReadCanceled", testReadCanceled},
		{"TornReads", testTornReads},
		{"PeerClosePendingRecv", testPeerClosePendingRecv},
		{"PeerClosePendingSend", testPeerClosePendingSend},
		{"PeerClosePendingRead", testPeerClosePendingRead},
		{"LocalClose", testLocalClose},
		{"TransportClose", testTransportClose},
		{"AcceptDial", testAcceptDial},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, setup(t, f)) })
	}
}

// guard bounds every blocking call of the suite, so that a broken
// implementation fails instead of hanging. It is never a timing assertion:
// it is long enough for the slowest honest run seen, a busy-polling
// transport under -race in the emulated Soft-RoCE VM on a loaded host
// (33 s for one subtest).
const guard = 90 * time.Second

// env is one subtest's pair of transports, with the server listening.
type env struct {
	t       *testing.T
	credits int
	server  transport.Transport
	client  transport.Transport
	ln      transport.Listener
}

func setup(t *testing.T, f Factory) *env {
	server, client, addr := f.New(t)
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	ln, err := server.Listen(addr)
	if err != nil {
		t.Fatalf("Listen(%q): %v", addr, err)
	}
	return &env{t: t, credits: f.Credits, server: server, client: client, ln: ln}
}

// connect dials the server and accepts the connection: c is the client's
// end, s the server's.
func (e *env) connect() (c, s transport.Conn) {
	e.t.Helper()
	ctx := guarded(e.t)
	type accepted struct {
		conn transport.Conn
		err  error
	}
	ch := make(chan accepted, 1)
	go func() {
		conn, err := e.ln.Accept(ctx)
		ch <- accepted{conn, err}
	}()
	c, err := e.client.Dial(ctx, e.ln.Addr())
	a := <-ch
	if err != nil || a.err != nil {
		e.t.Fatalf("connect: Dial: %v; Accept: %v", err, a.err)
	}
	return c, a.conn
}

// region registers size bytes on tr, filled with pattern(seed).
func (e *env) region(tr transport.Transport, size, seed int) transport.Region {
	e.t.Helper()
	r, err := tr.Register(size)
	if err != nil {
		e.t.Fatalf("Register(%d): %v", size, err)
	}
	e.t.Cleanup(func() { r.Close() })
	fill(r.Bytes(), seed)
	return r
}

// guarded returns a context that ends at guard or with the test.
func guarded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

// fill writes a pattern that never contains sentinel.
func fill(b []byte, seed int) {
	for i := range b {
		b[i] = patternByte(i, seed)
	}
}

func patternByte(i, seed int) byte { return byte((i+seed*31)%200 + 1) }

// sentinel marks destination bytes no READ has written.
const sentinel = 0xEE

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// async runs fn in a goroutine and returns its result channel.
func async(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

// wait returns the result of an async call, failing if none comes within
// the guard: the call should have been woken by now.
func wait(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(guard):
		t.Fatalf("%s: still blocked after %v", what, guard)
		return nil
	}
}
