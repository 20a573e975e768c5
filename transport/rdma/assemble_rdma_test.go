//go:build rdma

package rdma

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
)

// connPairs dials n connections from one client transport to one server
// transport (so the server's connections share its completion goroutine).
func connPairs(t *testing.T, cfg Config, n int) (cs, ss []*conn, st *Transport) {
	t.Helper()
	st, ct := newTransport(t, cfg), newTransport(t, cfg)
	l, err := st.Listen(testAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ctx := ctxT(t)
	for range n {
		c, err := ct.Dial(ctx, l.Addr())
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
		cs, ss = append(cs, c.(*conn)), append(ss, s.(*conn))
	}
	return cs, ss, st
}

// The completion goroutine copies no fragment: with one connection's
// assembler stopped in the middle of a 1 MiB message, another connection of
// the same transport still gets its messages.
func TestAssemblerOffPoller(t *testing.T) {
	cs, ss, st := connPairs(t, Config{BufSize: 4096}, 2)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // (registered last, runs first: before the Closes)
	hold := func(c *conn) {
		if c == ss[0] {
			<-release
		}
	}
	st.asmHook.Store(&hold)
	big := pattern(1<<20, 1)
	sent := make(chan error, 1)
	go func() { sent <- cs[0].Send(context.Background(), big) }()
	ctx := ctxT(t)
	for i := range 20 {
		if err := cs[1].Send(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := ss[1].Recv(short, nil)
		cancel()
		if err != nil || len(got) != 1 || got[0] != byte(i) {
			t.Fatalf("message %d on the other connection, with the first's assembler stopped: %v, %v", i, got, err)
		}
	}
	free()
	got, err := ss[0].Recv(ctx, nil)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("the 1 MiB message: %d bytes, %v", len(got), err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// Whole messages that arrive while the assembler still holds part of a
// fragmented one are queued behind it: Recv sees them in the order sent.
func TestAssemblerKeepsOrder(t *testing.T) {
	const small = 3
	cs, ss, st := connPairs(t, Config{BufSize: 4096}, 1)
	a := &ss[0].asmr
	big := pattern(64<<10, 2)
	frags := (len(big) + cs[0].fragSize - 1) / cs[0].fragSize // all fit the receive buffers
	first := true
	hook := func(c *conn) {
		// Before copying the first fragment, let the small messages sent
		// after the big one reach the poller: routed behind the fragments,
		// they are counted as pending. Give up after a while, which only
		// an order bug makes happen.
		if !first {
			return
		}
		first = false
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			a.mu.Lock()
			n := a.pending
			a.mu.Unlock()
			if n >= frags+small {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	st.asmHook.Store(&hook)
	ctx := ctxT(t)
	go func() {
		_ = cs[0].Send(ctx, big)
		for i := range small {
			_ = cs[0].Send(ctx, []byte{byte(i)})
		}
	}()
	got, err := ss[0].Recv(ctx, nil)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("first message: %d bytes, %v; want the %d-byte one sent first", len(got), err, len(big))
	}
	for i := range small {
		got, err := ss[0].Recv(ctx, nil)
		if err != nil || len(got) != 1 || got[0] != byte(i) {
			t.Fatalf("message %d: %v, %v", i+1, got, err)
		}
	}
}
