package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGetWithoutDeadlineTimesOut: a GET whose context has no deadline is
// still bounded by RequestTimeout although its context makes no timer
// until it waits (lazyDeadline): a READ that never completes ends with
// ErrUnavailable, not a hang.
func TestGetWithoutDeadlineTimesOut(t *testing.T) {
	r := newReadyRig(t)
	r.c.cfg.RequestTimeout = 50 * time.Millisecond
	r.f.stallReads.Store(true)
	_, err := r.c.Get(context.Background(), []byte("k"))
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GET of a stalled region: %v, want ErrUnavailable for the deadline", err)
	}
}

func TestLazyDeadline(t *testing.T) {
	before, start := time.Now(), monoNow()
	t.Run("deadline without a timer until Done", func(t *testing.T) {
		ctx, l := withDeadlineLazily(context.Background(), monoNow, start, 20*time.Millisecond)
		d, ok := ctx.Deadline()
		if !ok || d.Before(before.Add(20*time.Millisecond)) || d.After(time.Now().Add(20*time.Millisecond)) {
			t.Fatalf("Deadline %v %v, want 20ms after the start", d, ok)
		}
		if d2, _ := ctx.Deadline(); !d2.Equal(d) {
			t.Fatalf("Deadline moved from %v to %v", d, d2)
		}
		if l.made.Load() || ctx.Err() != nil {
			t.Fatal("a timer or an error before anything waited")
		}
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err after Done: %v", ctx.Err())
		}
		l.release()
	})
	t.Run("derived context ends at the deadline", func(t *testing.T) {
		ctx, l := withDeadlineLazily(context.Background(), monoNow, start, 20*time.Millisecond)
		defer l.release()
		child, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		<-child.Done()
		if !errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("child Err: %v", child.Err())
		}
	})
	t.Run("caller's cancellation seen before any wait", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ctx, l := withDeadlineLazily(parent, monoNow, start, time.Hour)
		defer l.release()
		cancel()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("Err after the caller cancelled: %v", ctx.Err())
		}
		<-ctx.Done()
	})
	t.Run("a caller's deadline is used as is", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if ctx, l := withDeadlineLazily(parent, monoNow, start, time.Second); ctx != parent || l != nil {
			t.Fatal("wrapped a context that has a deadline")
		}
	})
	t.Run("release stops the timer", func(t *testing.T) {
		ctx, l := withDeadlineLazily(context.Background(), monoNow, start, time.Hour)
		done := ctx.Done()
		l.release()
		<-done
	})
	t.Run("a context something derived from is not reused", func(t *testing.T) {
		ctx, l := withDeadlineLazily(context.Background(), monoNow, start, time.Hour)
		child, cancel := context.WithCancel(ctx)
		cancel()
		l.release()
		if l.parent == nil || !l.made.Load() || child.Err() == nil {
			t.Fatal("a context that may be referenced was reset for reuse")
		}
	})
}
