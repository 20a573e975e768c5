package transporttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// allFail checks that every operation on c fails with ErrClosed.
func allFail(t *testing.T, ctx context.Context, c transport.Conn, d transport.Descriptor, when string) {
	t.Helper()
	wantErr(t, "Send "+when, c.Send(ctx, []byte("x")), transport.ErrClosed)
	_, err := c.Recv(ctx, nil)
	wantErr(t, "Recv "+when, err, transport.ErrClosed)
	err = c.Read(ctx, []transport.ReadOp{{Remote: d, Dst: make([]byte, 8)}})
	wantErr(t, "Read "+when, err, transport.ErrClosed)
}

func testPeerClosePendingRecv(t *testing.T, e *env) {
	ctx := guarded(t)
	r := e.region(e.server, 4096, 1)
	for _, closer := range []string{"server", "client"} {
		c, s := e.connect()
		waiter, peer := c, s
		if closer == "client" {
			waiter, peer = s, c
		}
		recv := async(func() error { _, err := waiter.Recv(ctx, nil); return err })
		peer.Close()
		wantErr(t, fmt.Sprintf("pending Recv when the %s closes", closer), wait(t, "Recv", recv), transport.ErrClosed)
		allFail(t, ctx, waiter, r.Descriptor(), fmt.Sprintf("after the %s closed", closer))
	}
}

func testPeerClosePendingSend(t *testing.T, e *env) {
	ctx := guarded(t)
	c, s := e.connect()
	noErr(t, "fill the window", sendMany(ctx, c, 0, e.credits))
	send := async(func() error { return c.Send(ctx, []byte("blocked")) })
	s.Close()
	wantErr(t, "Send blocked on credits when the peer closes", wait(t, "Send", send), transport.ErrClosed)
}

func testPeerClosePendingRead(t *testing.T, e *env) {
	ctx := guarded(t)
	const opLen = 64 << 10
	r := e.region(e.server, transport.MaxBatch*opLen, 2)
	c, s := e.connect()
	ops := make([]transport.ReadOp, transport.MaxBatch)
	for i := range ops {
		ops[i] = transport.ReadOp{Remote: r.Descriptor(), Offset: uint64(i * opLen), Dst: make([]byte, opLen)}
	}
	started := make(chan struct{})
	reads := async(func() error {
		for i := 0; ; i++ {
			err := c.Read(ctx, ops)
			if i == 0 {
				close(started)
			}
			if err != nil {
				return err
			}
		}
	})
	<-started
	s.Close()
	wantErr(t, "Reads when the peer closes", wait(t, "Read", reads), transport.ErrClosed)
}

func testLocalClose(t *testing.T, e *env) {
	ctx := guarded(t)
	r := e.region(e.server, 4096, 1)
	c, _ := e.connect()
	recv := async(func() error { _, err := c.Recv(ctx, nil); return err })
	noErr(t, "Conn.Close", c.Close())
	wantErr(t, "pending Recv on a conn closed by this end", wait(t, "Recv", recv), transport.ErrClosed)
	allFail(t, ctx, c, r.Descriptor(), "after Close")
}

func testTransportClose(t *testing.T, e *env) {
	ctx := guarded(t)
	r := e.region(e.client, 4096, 1)
	c, s := e.connect()
	recv := async(func() error { _, err := c.Recv(ctx, nil); return err })
	noErr(t, "server Transport.Close", e.server.Close())
	wantErr(t, "pending Recv when the peer's transport closes", wait(t, "Recv", recv), transport.ErrClosed)
	allFail(t, ctx, s, r.Descriptor(), "on a closed transport")
	_, err := e.server.Register(64)
	wantErr(t, "Register on a closed transport", err, transport.ErrClosed)
	_, err = e.ln.Accept(ctx)
	wantErr(t, "Accept on a closed transport", err, transport.ErrClosed)
}

func testAcceptDial(t *testing.T, e *env) {
	ctx := guarded(t)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := e.ln.Accept(short)
	cancel()
	wantErr(t, "Accept with nobody dialing", err, context.DeadlineExceeded)

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = e.client.Dial(done, e.ln.Addr())
	wantErr(t, "Dial with a canceled context", err, context.Canceled)

	c, s := e.connect()
	if c.RemoteAddr() == "" || s.RemoteAddr() == "" {
		t.Errorf("RemoteAddr: client end %q, server end %q; want both set", c.RemoteAddr(), s.RemoteAddr())
	}

	accept := async(func() error { _, err := e.ln.Accept(ctx); return err })
	noErr(t, "Listener.Close", e.ln.Close())
	wantErr(t, "pending Accept when the listener closes", wait(t, "Accept", accept), transport.ErrClosed)
	// Connections already accepted outlive their listener.
	noErr(t, "Send after the listener closed", c.Send(ctx, []byte("still here")))
	got, err := s.Recv(ctx, nil)
	if err != nil || string(got) != "still here" {
		t.Fatalf("Recv after the listener closed: %q, %v", got, err)
	}
}
