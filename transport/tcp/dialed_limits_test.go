package tcp

import (
	"errors"
	"net"
	"testing"
	"time"
)

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
