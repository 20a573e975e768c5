package tcp

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// Transport is one TCP endpoint: its registered regions, listeners and
// connections. Every connection, dialed or accepted, serves remote READs of
// every region registered here.
type Transport struct {
	cfg       Config
	filter    atomic.Pointer[Filter]
	tlsServer *tls.Config // listeners' TLS configuration, if cfg.TLS
	watch     *watchdog   // enforces the connections' timeouts

	creditDelay time.Duration // creditIdleDelay; tests set it before they dial

	mu        sync.Mutex // guards the fields below
	closed    bool
	conns     map[*conn]struct{}
	listeners []*listener // in Listen order; the first names the node by default

	regions registry
}

var _ transport.Transport = (*Transport)(nil)

// New returns a Transport configured by cfg (see Config for defaults).
func New(cfg Config) (*Transport, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Transport{cfg: cfg, conns: map[*conn]struct{}{}, creditDelay: creditIdleDelay}
	if cfg.TLS != nil && cfg.TLS.Server != nil {
		t.tlsServer = t.serverConfig()
	}
	t.regions.init()
	t.SetFilter(cfg.Filter)
	t.startWatchdog()
	return t, nil
}

// Name reports "tcp".
func (*Transport) Name() string { return "tcp" }

// SetFilter replaces the transport's Filter (nil: cut nothing). It takes
// effect for the next message or READ on every connection, existing or new.
func (t *Transport) SetFilter(f Filter) { t.filter.Store(&f) }

func (t *Transport) cut(local, remote string) bool {
	f := *t.filter.Load()
	return f != nil && f(local, remote)
}

// Register allocates size zeroed bytes off the Go heap and makes them
// readable by peers.
func (t *Transport) Register(size int) (transport.Region, error) {
	return t.regions.add(size)
}

// Listen accepts connections at addr ("host:port"; port 0 picks one).
func (t *Transport) Listen(addr string) (transport.Listener, error) {
	if t.cfg.TLS != nil && t.tlsServer == nil {
		return nil, fmt.Errorf("tcp: listen %s: %w: TLS without a Server configuration", addr, ErrConfig)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen %s: %w", addr, err)
	}
	l := newListener(t, ln)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		ln.Close()
		return nil, fmt.Errorf("tcp: listen %s: transport %w", addr, transport.ErrClosed)
	}
	t.listeners = append(t.listeners, l)
	l.start()
	return l, nil
}

// Dial connects to a listener at addr. It gives up after Config.DialTimeout
// if ctx has no earlier deadline.
func (t *Transport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	if t.isClosed() {
		return nil, fmt.Errorf("tcp: dial %s: transport %w", addr, transport.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: dial %s: %w", addr, err)
	}
	return t.handshake(ctx, nc, addr, nil)
}

// Close closes every listener, connection and region of the transport, and
// waits for their goroutines. Later calls do nothing.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	ls := t.listeners
	cs := make([]*conn, 0, len(t.conns))
	for c := range t.conns {
		cs = append(cs, c)
	}
	t.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range cs {
		c.Close()
	}
	t.watch.close()
	t.regions.closeAll()
	return nil
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// hello is what this end announces in a handshake.
func (t *Transport) hello() hello {
	return hello{
		version:    helloVersion,
		maxMessage: uint32(t.cfg.MaxMessage),
		credits:    uint32(t.cfg.Credits),
		maxReads:   uint32(t.cfg.MaxOutstandingReads),
		node:       t.node(),
	}
}

func (t *Transport) node() string {
	if t.cfg.Node != "" {
		return t.cfg.Node
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.listeners) == 0 {
		return ""
	}
	return t.listeners[0].Addr()
}

// adopt tracks a new connection so that Close reaches it.
func (t *Transport) adopt(c *conn) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("tcp: connection to %s: transport %w", c.remote, transport.ErrClosed)
	}
	t.conns[c] = struct{}{}
	// The loops are counted here, under the lock that Close takes to list
	// the connections, so that its c.Close never waits on a WaitGroup whose
	// Add races with the Wait (the loops start right after adopt returns).
	c.loops.Add(2)
	return nil
}

// snapshotConns appends the open connections to dst.
func (t *Transport) snapshotConns(dst []*conn) []*conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.conns {
		dst = append(dst, c)
	}
	return dst
}

func (t *Transport) forget(c *conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

func (t *Transport) forgetListener(l *listener) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, x := range t.listeners {
		if x == l {
			t.listeners = append(t.listeners[:i:i], t.listeners[i+1:]...)
			return
		}
	}
}
