package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// lateCancelTransport lets the client's asynchronous watch cancel be
// scheduled late, as the Go scheduler may: a WATCH_CANCEL frame is held
// until the next WATCH frame has gone out on the connection (or, so that a
// client that sends its cancel synchronously does not hang, until 3s).
type lateCancelTransport struct {
	transport.Transport
}

type lateCancelConn struct {
	transport.Conn
	mu       sync.Mutex
	nextOpen chan struct{} // closed by the next WATCH frame sent
}

func (t lateCancelTransport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	c, err := t.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &lateCancelConn{Conn: c, nextOpen: make(chan struct{})}, nil
}

func (c *lateCancelConn) Send(ctx context.Context, msg []byte) error {
	var req wire.Request
	if wire.DecodeRequest(msg, &req) == nil {
		switch req.Op {
		case wire.OpWatchCancel:
			c.mu.Lock()
			ch := c.nextOpen
			c.mu.Unlock()
			select {
			case <-ch:
			case <-time.After(3 * time.Second):
			}
		case wire.OpWatch:
			err := c.Conn.Send(ctx, msg)
			c.mu.Lock()
			close(c.nextOpen)
			c.nextOpen = make(chan struct{})
			c.mu.Unlock()
			return err
		}
	}
	return c.Conn.Send(ctx, msg)
}

// TestWatchReplacedAtPerConnLimit: once a watch's channel has closed, the
// server no longer counts it, so a new watch opened then fits the
// per-connection limit. Were the cancel sent in the background, a watch
// opened before it arrived would be refused as a bad request, a terminal
// error, although the caller had only one watch.
func TestWatchReplacedAtPerConnLimit(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{MaxWatchesPerConn: 1})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	c, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), Transport: lateCancelTransport{tr},
		RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	bg := context.Background()

	ctx1, cancel1 := context.WithCancel(bg)
	ch1 := c.Watch(ctx1, []byte("a"))
	if err := c.Put(bg, []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if r := <-ch1; r.Err != nil || len(r.Events) != 1 {
		t.Fatalf("first watch: %+v", r)
	}
	cancel1()
	for range ch1 { // the watch is over once its channel is closed
	}

	ctx2, cancel2 := context.WithTimeout(bg, 20*time.Second)
	defer cancel2()
	ch2 := c.Watch(ctx2, []byte("b"))
	if err := c.Put(bg, []byte("b"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	r := <-ch2
	if r.Err != nil || len(r.Events) != 1 {
		t.Fatalf("a watch opened after the only other one ended: %+v (err %v)", r, r.Err)
	}
}
