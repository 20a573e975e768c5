package tcp

import (
	"context"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// connPair returns the two ends of one connection over loopback, whose
// receivers wait creditDelay before they return credits on their own.
func connPair(t *testing.T, credits int, creditDelay time.Duration) (client, server *conn) {
	t.Helper()
	st, ct := newTestTransport(t, Config{Credits: credits}), newTestTransport(t, Config{Credits: credits})
	st.creditDelay, ct.creditDelay = creditDelay, creditDelay
	ln, err := st.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan *conn, 1)
	go func() {
		s, err := ln.Accept(ctx)
		if err != nil {
			t.Error(err)
			accepted <- nil
			return
		}
		accepted <- s.(*conn)
	}()
	c, err := ct.Dial(ctx, ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.FailNow()
	}
	return c.(*conn), s
}

// exchange runs n requests from c, each answered by s after work.
func exchange(t *testing.T, c, s *conn, n int, work time.Duration) {
	t.Helper()
	ctx := context.Background()
	var buf []byte
	for i := range n {
		if err := c.Send(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		var err error
		if buf, err = s.Recv(ctx, buf); err != nil {
			t.Fatal(err)
		}
		time.Sleep(work)
		if err := s.Send(ctx, buf); err != nil { // the answer
			t.Fatal(err)
		}
		if buf, err = c.Recv(ctx, buf); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCreditsRideOnAnswers: in a request/response exchange the receiver's
// credits go back on its answers, not in CREDIT frames of their own (which
// cost each request a frame, a syscall and a wake-up at the far end).
func TestCreditsRideOnAnswers(t *testing.T) {
	// A delay no stall of this machine outlasts, so that every answer
	// comes within it (the default is 250 ms).
	c, s := connPair(t, 64, time.Minute)
	const n = 200
	exchange(t, c, s, n, 300*time.Microsecond) // the work a server does before it answers
	if f := s.msgs.frames.Load() + c.msgs.frames.Load(); f != 0 {
		t.Fatalf("%d CREDIT frames for %d request/response pairs, want the credits on the answers", f, n)
	}
}

// TestDefaultDelayOutlastsBusyAnswers: with the default delay, the answers
// of a busy server (here 20 ms, a loaded cluster's PUT) still take the
// credits along. (At 2 ms every request would cost a CREDIT frame.)
func TestDefaultDelayOutlastsBusyAnswers(t *testing.T) {
	c, s := connPair(t, 64, creditIdleDelay)
	const n = 10
	exchange(t, c, s, n, 20*time.Millisecond) // an fsync and a Raft round under load
	// A stall of the machine longer than the delay can cost a frame; one
	// per request is the failure this test catches.
	if f := s.msgs.frames.Load(); f > n/4 {
		t.Fatalf("%d CREDIT frames for %d requests answered after 20 ms; want the credits on the answers", f, n)
	}
}

// TestIdleReceiverReturnsCredits: a receiver that consumes a message and
// sends nothing back still returns the credit, so the sender's window is
// whole again.
func TestIdleReceiverReturnsCredits(t *testing.T) {
	c, s := connPair(t, 64, creditIdleDelay)
	ctx := context.Background()
	if err := c.Send(ctx, []byte("one-way")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(ctx, nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the idle receiver to return its credit (the sender's window whole)", func() bool {
		return len(c.msgs.window) == cap(c.msgs.window)
	})
	if s.msgs.frames.Load() != 1 {
		t.Fatalf("%d CREDIT frames, want 1", s.msgs.frames.Load())
	}
}
