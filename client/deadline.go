package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// lazyDeadline is the context of a GET whose caller gave no deadline: it
// carries the deadline RequestTimeout after the GET started, but makes the
// timer that enforces it (a context.WithDeadline of the caller's context)
// only when something asks for Done, that is, when the GET is about to
// wait. A cached one-sided GET over RDMA usually never waits (its READs have
// completed by the time the transport looks), and a timer per GET was a
// large part of its cost on a slow CPU: an allocation, a clock reading, a
// timer-heap insert that may wake the network poller, and its removal.
//
// What is enforced is unchanged where it matters: every wait (a READ that
// has not completed, an RPC, a dial) selects on Done and ends at the
// deadline. Until the first wait Err reports only the caller's
// cancellation, so a GET past its deadline may finish the non-blocking step
// it is in (bounded: ReadRetries attempts) before it notices.
//
// The context is pooled. It goes only to the client's own code and to the
// transport's Read, Send, Recv and Dial, which do not keep it past the call;
// a context derived from it (context.WithTimeout and the like, which the
// slow paths make) may, and deriving one looks up Value, so a lazyDeadline
// whose Value was ever called is not reused.
type lazyDeadline struct {
	parent   context.Context
	now      func() mono   // the client's clock
	start    mono          // the GET's start on it,
	timeout  time.Duration // and how long it may take
	mu       sync.Mutex    // guards deadline and the making of the real context
	deadline time.Time     // start+timeout as a time.Time; zero until asked for
	made     atomic.Bool   // real and cancel are set (by the first Done)
	real     context.Context
	cancel   context.CancelFunc
	escaped  atomic.Bool // Value was called: something may keep this context
}

var lazyPool = sync.Pool{New: func() any { return new(lazyDeadline) }}

// withDeadlineLazily returns ctx itself if it has a deadline, else a
// lazyDeadline for it with the deadline timeout after start (a reading of
// now); release it when the call ends.
func withDeadlineLazily(ctx context.Context, now func() mono, start mono, timeout time.Duration) (context.Context, *lazyDeadline) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, nil
	}
	l := lazyPool.Get().(*lazyDeadline)
	l.parent, l.now, l.start, l.timeout = ctx, now, start, timeout
	return l, l
}

// release ends the context: it stops the timer if one was made, and pools
// the context unless something may still refer to it.
func (l *lazyDeadline) release() {
	if l.made.Load() {
		l.cancel()
	}
	if l.escaped.Load() {
		return
	}
	l.made.Store(false)
	l.parent, l.now, l.real, l.cancel, l.deadline = nil, nil, nil, nil, time.Time{}
	lazyPool.Put(l)
}

// timed returns the real context, making it (and its timer) on first use.
func (l *lazyDeadline) timed() context.Context {
	if l.made.Load() {
		return l.real
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.made.Load() {
		l.real, l.cancel = context.WithDeadline(l.parent, l.deadlineLocked())
		l.made.Store(true)
	}
	return l.real
}

// deadlineLocked turns start+timeout into a time.Time, once (the start is
// a reading of the monotonic clock alone, which a time.Time cannot be made
// from): now plus what is left of the timeout. l.mu is held.
func (l *lazyDeadline) deadlineLocked() time.Time {
	if l.deadline.IsZero() {
		left := l.timeout - l.now().sub(l.start) // read before time.Now: never short of the timeout
		l.deadline = time.Now().Add(left)
	}
	return l.deadline
}

func (l *lazyDeadline) Deadline() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadlineLocked(), true
}

// Done makes the timer (once) and returns its channel.
func (l *lazyDeadline) Done() <-chan struct{} { return l.timed().Done() }

func (l *lazyDeadline) Err() error {
	if l.made.Load() {
		return l.real.Err()
	}
	return l.parent.Err()
}

// Value looks through the real context once there is one, so that a
// context derived from this one finds the real context's cancellation
// (context's own propagation, no goroutine per derived context).
func (l *lazyDeadline) Value(key any) any {
	l.escaped.Store(true)
	if l.made.Load() {
		return l.real.Value(key)
	}
	return l.parent.Value(key)
}
