package tcp

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// TestByteWindowHoldsSender: with the receiver consuming nothing, a sender
// of 4 MiB messages stops once DefaultQueueBytes are in flight, though it
// holds message credits for more; a consumed message's credit comes back
// at once, so the sender goes on. Credits alone would not do: 64 of them
// let a client that reads no replies make a server hold 256 MiB.
func TestByteWindowHoldsSender(t *testing.T) {
	c, s := connPair(t, 64, time.Hour) // credits return on bytes, not on the idle timer
	if c.MaxMessage() != transport.DefaultMaxMessage {
		t.Fatalf("MaxMessage %d", c.MaxMessage())
	}
	msg := make([]byte, transport.DefaultMaxMessage)
	fit := DefaultQueueBytes / len(msg)
	ctx := testCtx(t)
	for i := range fit {
		if err := c.Send(ctx, msg); err != nil {
			t.Fatalf("message %d of %d in the window: %v", i+1, fit, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := c.Send(short, msg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a message past the byte window with %d credits left: %v, want it held", 64-fit, err)
	}
	if _, err := s.Recv(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, msg); err != nil {
		t.Fatalf("after the receiver consumed one: %v", err)
	}
}

// TestByteWindowOneLargeMessage: a message as large as MaxMessage always
// fits an empty window, even one MaxMessage exceeds.
func TestByteWindowOneLargeMessage(t *testing.T) {
	if w := windowBytes(64 << 20); w != 64<<20 {
		t.Fatalf("window of a 64 MiB connection: %d", w)
	}
	var w byteWindow
	w.init(10, 4)
	if err := w.received(25); err != nil {
		t.Fatalf("one message above the window, none in flight: %v", err)
	}
	if err := w.received(1); err == nil {
		t.Fatal("a second message past the window accepted")
	}
	if err := w.release(1); err != nil || w.bytes != 0 {
		t.Fatalf("release: %v, %d bytes left", err, w.bytes)
	}
	if err := w.release(1); err == nil {
		t.Fatal("credits returned for a message never sent accepted")
	}
}

// TestPeerBreakingByteWindow: a peer that sends more bytes than the window
// while it still holds message credits is closed as a protocol violation,
// before the payload is read.
func TestPeerBreakingByteWindow(t *testing.T) {
	h := okHello()
	h.maxMessage, h.credits = 4<<20, 64
	_, c, nc := rawPair(t, Config{}, h)
	ctx := testCtx(t)
	msg := make([]byte, 4<<20)
	sent := 0
	for range 8 { // 32 MiB against a 16 MiB window: the conn fails midway
		if _, err := nc.Write(frame(header{typ: frameMsg, length: uint64(len(msg))}, msg)); err != nil {
			break
		}
		sent++
	}
	_, _ = io.Copy(io.Discard, nc) // until the transport closes the socket
	var err error
	for err == nil {
		_, err = c.Recv(ctx, nil)
	}
	if !errors.Is(err, transport.ErrProtocol) && !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Recv after the raw peer broke the byte window: %v", err)
	}
	if tr := c.(*conn); tr.err == nil || !errors.Is(tr.err, transport.ErrProtocol) {
		t.Fatalf("connection closed with %v, want a protocol violation (sent %d messages)", tr.err, sent)
	}
}

// TestByteWindowLargePingPong: messages larger than the write buffer
// start going out before Send returns, and their credits can come back
// (riding on the answer) before it does; the accounts must already hold
// them: were a message's size pushed after writing it, the answer's
// credit could find it missing, and the connection would fail as a
// protocol violation under load.
func TestByteWindowLargePingPong(t *testing.T) {
	c, s := connPair(t, 64, time.Hour)
	ctx := testCtx(t)
	big := make([]byte, 1<<20)
	done := make(chan error, 1)
	go func() {
		var buf []byte
		for {
			var err error
			if buf, err = s.Recv(ctx, buf); err != nil {
				done <- nil
				return
			}
			if err := s.Send(ctx, []byte("ok")); err != nil { // takes the credit back at once
				done <- err
				return
			}
		}
	}()
	var buf []byte
	for i := range 300 {
		if err := c.Send(ctx, big); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		var err error
		if buf, err = c.Recv(ctx, buf); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestClosureOutranksDeadline: an operation whose ctx is done on a
// connection a limit has closed returns the closure's error, not ctx's.
// The server counts a reply that timed out as a slow reader; were the
// write timeout that closed the connection reported as a deadline too, one
// closure would count under both reasons (CI: 5 closures for 4 clients).
func TestClosureOutranksDeadline(t *testing.T) {
	c, _ := connPair(t, 64, time.Hour)
	c.limitFail(ReasonWrite, errors.New("test: the peer took no bytes"))
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for name, op := range map[string]func() error{
		"Send": func() error { return c.Send(done, []byte("x")) },
		"Read": func() error { return c.Read(done, nil) },
	} {
		if err := op(); !errors.Is(err, ErrTimeout) || errors.Is(err, context.Canceled) {
			t.Errorf("%s on a connection closed by WriteTimeout, ctx done: %v; want the closure's ErrTimeout", name, err)
		}
	}
}
