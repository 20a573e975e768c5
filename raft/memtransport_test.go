package raft

import (
	"context"
	"fmt"
	"sync"

	"github.com/kvd-project/kvd/transport"
)

// memNet is an in-process network for tests: transports register
// listeners by address, and a partition table decides which pairs of
// addresses hear each other (cut traffic is dropped silently, like packets
// into a black hole). Only the message half of transport.Conn is modelled.
type memNet struct {
	mu        sync.Mutex
	listeners map[string]*memListener
	isolated  map[string]bool
}

func newMemNet() *memNet {
	return &memNet{listeners: map[string]*memListener{}, isolated: map[string]bool{}}
}

// isolate cuts (or, with false, heals) all traffic to and from addr.
func (n *memNet) isolate(addr string, cut bool) {
	n.mu.Lock()
	n.isolated[addr] = cut
	n.mu.Unlock()
}

func (n *memNet) cut(a, b string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.isolated[a] || n.isolated[b]
}

// memTransport is one endpoint; name is the address its node listens on,
// which is how the partition table knows the dialling side.
type memTransport struct {
	net  *memNet
	name string
	// maxMessage, if set, lowers this end's message limit; a connection
	// uses the smaller of both ends' limits.
	maxMessage int

	mu     sync.Mutex
	conns  map[*memConn]struct{}
	lns    []*memListener
	closed bool
}

func (n *memNet) endpoint(name string) *memTransport {
	return &memTransport{net: n, name: name, conns: map[*memConn]struct{}{}}
}

func (t *memTransport) Name() string { return "mem" }

func (t *memTransport) Register(int) (transport.Region, error) {
	return nil, transport.ErrUnsupported
}

func (t *memTransport) Listen(addr string) (transport.Listener, error) {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if _, ok := t.net.listeners[addr]; ok {
		return nil, fmt.Errorf("mem: %s already in use", addr)
	}
	l := &memListener{net: t.net, t: t, addr: addr, accept: make(chan *memConn, 64), done: make(chan struct{})}
	t.net.listeners[addr] = l
	t.mu.Lock()
	t.lns = append(t.lns, l)
	t.mu.Unlock()
	return l, nil
}

func (t *memTransport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	t.net.mu.Lock()
	l := t.net.listeners[addr]
	t.net.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("mem: dial %s: connection refused: %w", addr, transport.ErrClosed)
	}
	a, b := newMemPair(t.net, t.name, addr)
	a.maxMessage = min(t.limit(), l.t.limit())
	b.maxMessage = a.maxMessage
	t.track(a)
	l.t.track(b)
	select {
	case l.accept <- b:
		return a, nil
	case <-l.done:
	case <-ctx.Done():
	}
	a.Close()
	return nil, fmt.Errorf("mem: dial %s: %w", addr, transport.ErrClosed)
}

func (t *memTransport) limit() int {
	if t.maxMessage > 0 {
		return t.maxMessage
	}
	return transport.DefaultMaxMessage
}

func (t *memTransport) track(c *memConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return
	}
	t.conns[c] = struct{}{}
}

func (t *memTransport) Close() error {
	t.mu.Lock()
	t.closed = true
	conns, lns := t.conns, t.lns
	t.conns, t.lns = nil, nil
	t.mu.Unlock()
	for _, l := range lns {
		l.Close()
	}
	for c := range conns {
		c.Close()
	}
	return nil
}

type memListener struct {
	net    *memNet
	t      *memTransport
	addr   string
	accept chan *memConn
	once   sync.Once
	done   chan struct{}
}

func (l *memListener) Accept(ctx context.Context) (transport.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.done:
		return nil, transport.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *memListener) Addr() string { return l.addr }

func (l *memListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.net.mu.Lock()
		if l.net.listeners[l.addr] == l {
			delete(l.net.listeners, l.addr)
		}
		l.net.mu.Unlock()
	})
	return nil
}

// memConn is one end of a connected pair. The shared done channel closes
// both ends at once.
type memConn struct {
	net           *memNet
	local, remote string
	in, out       chan []byte
	done          chan struct{}
	once          *sync.Once
	maxMessage    int
}

func newMemPair(n *memNet, dialer, listener string) (*memConn, *memConn) {
	ab, ba := make(chan []byte, transport.DefaultCredits), make(chan []byte, transport.DefaultCredits)
	done, once := make(chan struct{}), &sync.Once{}
	a := &memConn{net: n, local: dialer, remote: listener, in: ba, out: ab, done: done, once: once, maxMessage: transport.DefaultMaxMessage}
	b := &memConn{net: n, local: listener, remote: dialer, in: ab, out: ba, done: done, once: once, maxMessage: transport.DefaultMaxMessage}
	return a, b
}

func (c *memConn) Send(ctx context.Context, msg []byte) error {
	if len(msg) > c.maxMessage {
		return transport.ErrMessageTooLarge
	}
	select {
	case <-c.done:
		return transport.ErrClosed
	default:
	}
	if c.net.cut(c.local, c.remote) {
		return nil
	}
	cp := append([]byte(nil), msg...)
	select {
	case c.out <- cp:
		return nil
	case <-c.done:
		return transport.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *memConn) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	select {
	case m := <-c.in:
		return append(buf[:0], m...), nil
	case <-c.done:
		return nil, transport.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *memConn) Read(context.Context, []transport.ReadOp) error { return transport.ErrUnsupported }
func (c *memConn) MaxMessage() int                                { return c.maxMessage }
func (c *memConn) RemoteAddr() string                             { return c.remote }

func (c *memConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}
