package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// freezingTransport makes the nodes at frozen addresses look stalled to the
// client, as a SIGSTOPped node does over TCP: the connection stays up, but
// nothing sent to it is answered and its READs never complete.
type freezingTransport struct {
	transport.Transport
	mu     sync.Mutex
	frozen map[string]bool
}

func (f *freezingTransport) isFrozen(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen[addr]
}

func (f *freezingTransport) freeze(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen[addr] = true
}

func (f *freezingTransport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	if f.isFrozen(addr) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	conn, err := f.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &freezingConn{Conn: conn, f: f, addr: addr, closed: make(chan struct{})}, nil
}

// freezingConn's frozen READs end, as a real connection's do, when it is
// closed.
type freezingConn struct {
	transport.Conn
	f      *freezingTransport
	addr   string
	once   sync.Once
	closed chan struct{}
}

func (c *freezingConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *freezingConn) Send(ctx context.Context, msg []byte) error {
	if c.f.isFrozen(c.addr) {
		return nil // accepted by the socket, never answered
	}
	return c.Conn.Send(ctx, msg)
}

func (c *freezingConn) Read(ctx context.Context, ops []transport.ReadOp) error {
	if c.f.isFrozen(c.addr) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closed:
			return transport.ErrClosed
		}
	}
	return c.Conn.Read(ctx, ops)
}

// TestGetMovesOnFromStalledLeader: a client that only GETs (linearizable,
// the default) must move past a leader that stopped answering, within its
// AttemptTimeout, and find the new leader, as docs/consistency.md ("A
// frozen leader") and Config.AttemptTimeout promise: "a request that a
// node does not answer within the client's attempt timeout moves on to the
// next node".
func TestGetMovesOnFromStalledLeader(t *testing.T) {
	key := []byte("k")
	for _, tc := range []struct {
		name string
		read func(context.Context, *client.Client) error
	}{
		{"Get", func(ctx context.Context, c *client.Client) error {
			_, err := c.Get(ctx, key)
			return err
		}},
		{"GetMany", func(ctx context.Context, c *client.Client) error {
			_, err := c.GetMany(ctx, [][]byte{key, []byte("k2")})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testMovesOnFromStalledLeader(t, tc.read) })
	}
}

func testMovesOnFromStalledLeader(t *testing.T, read func(context.Context, *client.Client) error) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	old := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ft := &freezingTransport{Transport: tr, frozen: map[string]bool{}}
	c, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), Transport: ft})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := read(ctx, c); err != nil {
			t.Fatal(err)
		}
	}

	// The leader stalls: cut off from its peers (so they elect another)
	// and, as the client sees it, answering nothing.
	var others []*kvdtest.Node
	for _, n := range nodes {
		if n != old {
			others = append(others, n)
		}
	}
	old.Isolate(others...)
	ft.freeze(old.Addr)
	start := time.Now()
	kvdtest.WaitLeader(t, others, 10*time.Second)
	t.Logf("new leader elected %v after the stall", time.Since(start).Round(time.Millisecond))

	// Three reads, each with 3 s: an attempt timeout (1 s) and a hello
	// fit in each, and the new leader is already elected.
	var failed int
	for i := 0; i < 3; i++ {
		gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		t0 := time.Now()
		err := read(gctx, c)
		cancel()
		t.Logf("read %d: %v after %v", i, err, time.Since(t0).Round(time.Millisecond))
		if err != nil {
			failed++
		}
	}
	if failed > 0 {
		t.Fatalf("%d of 3 reads (3 s each) failed %v after the leader stalled, with a new leader elected; want the client to move on within AttemptTimeout (1s)", failed, time.Since(start).Round(time.Millisecond))
	}
}

// TestStalledNodeErrorIsNoDeadline: when the stall watchdog closes a node
// whose one-sided READs stopped completing, a write waiting on that node
// fails as maybe applied (ErrUnavailable) — but its error must not claim
// context.DeadlineExceeded: the caller's context has not ended, and
// errors.Is(err, context.DeadlineExceeded) is how a caller tells that its
// own deadline passed. It did (errStalled wrapped DeadlineExceeded, for
// the client's own bookkeeping). RemoveMember is used because it has no
// attempt timeout of its own: only the watchdog ends its wait.
func TestStalledNodeErrorIsNoDeadline(t *testing.T) {
	got := make(chan struct{}, 1)
	addr := kvdtest.FakeNode(t, func(req *wire.Request, d transport.Descriptor) (resp wire.Response, act kvdtest.FakeAct) {
		switch req.Op {
		case wire.OpHello:
			resp.Value = kvdtest.LeaderHello(d)
		case wire.OpClock:
			resp.Version = uint64(time.Hour)
		case wire.OpMemberRemove:
			got <- struct{}{}
			return resp, kvdtest.FakeHang
		default:
			resp.Status = wire.StatusNotFound
		}
		return resp, kvdtest.FakeReply
	})
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ft := &freezingTransport{Transport: tr, frozen: map[string]bool{}}
	c, err := client.New(client.Config{Endpoints: []string{addr}, Transport: ft, AttemptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Get(ctx, []byte("x"), client.WithConsistency(client.Serializable)); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("warm-up GET: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.RemoveMember(ctx, 2) }()
	<-got
	ft.freeze(addr) // the node stalls: its READs stop completing
	go func() {
		gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
		defer gcancel()
		c.Get(gctx, []byte("x"), client.WithConsistency(client.Serializable))
	}()
	err = <-done
	if ctx.Err() != nil {
		t.Fatalf("the watchdog never ended the wait: %v", err)
	}
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("RemoveMember on a stalled node: %v, want ErrUnavailable (maybe applied)", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RemoveMember: %v matches context.DeadlineExceeded, but the caller's context is live", err)
	}
}
