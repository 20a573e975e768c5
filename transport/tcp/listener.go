package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
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
	handlers sync.WaitGroup // the accept loop and its handshakes
}

var _ transport.Listener = (*listener)(nil)

func newListener(t *Transport, ln net.Listener) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{t: t, ln: ln, ready: make(chan *conn, backlog), ctx: ctx, cancel: cancel,
		done: make(chan struct{})}
}

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
		l.handlers.Add(1)
		go l.admit(nc)
	}
}

// admit handshakes one incoming connection and queues it for Accept. A
// peer that fails the handshake is dropped: the peer sees why on its side.
func (l *listener) admit(nc net.Conn) {
	defer l.handlers.Done()
	ctx, cancel := context.WithTimeout(l.ctx, l.t.cfg.DialTimeout)
	defer cancel()
	c, err := l.t.handshake(ctx, nc, nc.RemoteAddr().String(), false)
	if err != nil {
		return
	}
	select {
	case l.ready <- c:
	case <-l.done:
		c.Close()
	}
}
