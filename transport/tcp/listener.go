package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// backlog is how many handshaken connections wait for Accept; further
// handshakes wait for room.
const backlog = 128

// listener handshakes incoming connections in the background and queues
// them for Accept.
type listener struct {
	t      *Transport
	ln     net.Listener
	ready  chan *conn
	ctx    context.Context // canceled by Close: aborts handshakes
	cancel context.CancelFunc

	done     chan struct{} // closed by Close
	closing  sync.Once
	handlers sync.WaitGroup // the accept loop, its handshakes and refusals

	maxConns  atomic.Int64 // <= 0: no limit
	open      atomic.Int64 // accepted sockets not yet closed (handshaking, ready or open)
	hook      atomic.Pointer[func(reason, remote string, err error)]
	lingering chan struct{} // refused sockets being drained
}

var _ transport.Listener = (*listener)(nil)

func newListener(t *Transport, ln net.Listener) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{t: t, ln: ln, ready: make(chan *conn, backlog), ctx: ctx, cancel: cancel,
		done: make(chan struct{}), lingering: make(chan struct{}, maxLingering)}
	l.maxConns.Store(int64(t.cfg.MaxConns))
	return l
}

// SetMaxConns replaces the listener's MaxConns (see Limits).
func (l *listener) SetMaxConns(n int) { l.maxConns.Store(int64(n)) }

// SetRefusalHook sets the function that hears of refusals (see Limits).
func (l *listener) SetRefusalHook(fn func(reason, remote string, err error)) {
	if fn == nil {
		l.hook.Store(nil)
		return
	}
	l.hook.Store(&fn)
}

func (l *listener) report(reason, remote string, err error) {
	if fn := l.hook.Load(); fn != nil {
		(*fn)(reason, remote, err)
	}
}

// release counts one accepted socket closed.
func (l *listener) release() { l.open.Add(-1) }

func (l *listener) start() {
	l.handlers.Add(1)
	go l.acceptLoop()
}

func (l *listener) Addr() string { return l.ln.Addr().String() }

// Accept returns the next connection whose handshake succeeded.
func (l *listener) Accept(ctx context.Context) (transport.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, fmt.Errorf("tcp: accept on %s: listener %w", l.Addr(), transport.ErrClosed)
	}
}

// Close stops accepting, aborts handshakes in progress and closes the
// connections nobody accepted. Accepted connections stay open.
func (l *listener) Close() error {
	l.closing.Do(func() {
		close(l.done)
		l.cancel()
		l.ln.Close()
		l.handlers.Wait()
		for {
			select {
			case c := <-l.ready:
				c.Close()
			default:
				l.t.forgetListener(l)
				return
			}
		}
	})
	return nil
}

func (l *listener) acceptLoop() {
	defer l.handlers.Done()
	pause := time.Duration(0)
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off and retry
			// rather than lose the listener.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(pause):
				continue
			case <-l.done:
				return
			}
		}
		pause = 0
		if max := l.maxConns.Load(); max > 0 && l.open.Load() >= max {
			remote := nc.RemoteAddr().String()
			l.refuse(nc)
			l.report(ReasonMaxConns, remote, fmt.Errorf("%w: %d connections open (max %d)", ErrRefused, l.open.Load(), max))
			continue
		}
		l.open.Add(1)
		l.handlers.Add(1)
		go l.admit(nc)
	}
}

// admit handshakes one incoming connection and queues it for Accept. A
// peer that fails the handshake, or does not finish it within
// HandshakeTimeout, is dropped (and reported): the peer sees why on its
// side.
func (l *listener) admit(nc net.Conn) {
	defer l.handlers.Done()
	ctx, cancel := context.WithTimeout(l.ctx, l.t.cfg.HandshakeTimeout)
	defer cancel()
	remote := nc.RemoteAddr().String()
	c, err := l.t.handshake(ctx, nc, remote, l)
	if err != nil {
		l.release()
		if l.ctx.Err() == nil {
			l.report(ReasonHandshake, remote, err)
		}
		return
	}
	select {
	case l.ready <- c:
	case <-l.done:
		c.Close()
	}
}
