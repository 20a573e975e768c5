//go:build rdma

package rdma

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// dial runs the active side of rdma_cm: resolve address and route, create
// the queue pair with every receive posted, connect, and learn the peer's
// parameters from its accept.
func (t *Transport) dial(ctx context.Context, addr string) (*conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rdma: dial %s: %w", addr, err)
	}
	ip, port, err := resolve(ctx, addr)
	if err != nil {
		return nil, err
	}
	ch, err := newEventChannel()
	if err != nil {
		return nil, err
	}
	id, err := createID(ch)
	if err != nil {
		ch.wakeUp()
		ch.destroy()
		return nil, err
	}
	c, err := newConn(t, id, ch)
	if err != nil {
		id.destroy()
		ch.wakeUp()
		ch.destroy()
		return nil, err
	}
	c.initAuth()
	if err := c.dial(ctx, ip, port); err != nil {
		c.fail(err)
		<-c.done
		return nil, fmt.Errorf("rdma: dial %s: %w", addr, err)
	}
	c.startWatch(nil)
	if err := c.dialAuth(ctx); err != nil {
		c.fail(err)
		<-c.done
		return nil, fmt.Errorf("rdma: dial %s: %w", addr, err)
	}
	// The listener grants READ before it proves itself (a test's raw dialer,
	// which skipped the handshake, is granted nothing).
	c.ready.Store(!c.t.auth.rawDial)
	return c, nil
}

func (c *conn) dial(ctx context.Context, ip net.IP, port int) error {
	timeout := c.cfg.ResolveTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(d), time.Millisecond))
	}
	// Before resolution: the route takes the type of service.
	if err := c.cm.setOptions(c.cfg.idTOS(), c.cfg.idAckExp()); err != nil {
		return err
	}
	if err := c.cm.resolveAddr(c.sourceFor(ip), ip, port, timeout); err != nil {
		return err
	}
	if _, err := c.ch.expect(ctx, evAddrResolved, "resolve address"); err != nil {
		return err
	}
	if c.cm.verbs() != c.t.dev {
		return fmt.Errorf("%w: %v is not on %s", ErrWrongDevice, ip, c.t.name)
	}
	if err := c.cm.resolveRoute(timeout); err != nil {
		if ip.IsLoopback() {
			return fmt.Errorf("%w (RoCE cannot route loopback addresses; use an address on the RDMA netdev)", err)
		}
		return err
	}
	if _, err := c.ch.expect(ctx, evRouteResolved, "resolve route"); err != nil {
		return err
	}
	// From setup on, c is reachable (Transport.Close, the poller): each
	// use of the id and the queue pair is a step, which teardown waits out.
	if err := c.step(c.setup); err != nil {
		return err
	}
	if err := c.step(func() error {
		return c.cm.connect(c.hello().encode(), c.t.attr.maxRdAtom, c.t.attr.maxInitRdAtom, c.cfg.RetryCount)
	}); err != nil {
		return err
	}
	ev, err := c.ch.expect(ctx, evConnectResp, "connect")
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err // ended while the connection came up: Dial fails
	}
	if err := c.step(func() error {
		// Remote access as initialAccess says (none until the listener
		// proves itself, with Auth); librdmacm would have granted
		// everything.
		var err error
		if c.auth.remoteQPN, err = c.cm.establish(c.qp, c.initialAccess(), c.cfg.RetryCount); err != nil {
			return err
		}
		c.connected.Store(true)
		peer, err := parseHello(ev.pdata)
		if err != nil {
			return err
		}
		c.connect(peer)
		return nil
	}); err != nil {
		return err
	}
	c.auth.offer, c.auth.offered = parseOffer(ev.pdata)
	return nil
}

// sourceFor picks the source address for a connection: Config.LocalAddr,
// or none (the kernel picks by route).
func (c *conn) sourceFor(net.IP) net.IP {
	if c.cfg.LocalAddr != "" {
		return net.ParseIP(c.cfg.LocalAddr)
	}
	return nil
}

// resolve turns "host:port" into one IP and a port.
func resolve(ctx context.Context, addr string) (net.IP, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, 0, fmt.Errorf("rdma: address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return nil, 0, fmt.Errorf("rdma: address %q: bad port", addr)
	}
	if host == "" {
		return nil, port, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip, port, nil
	}
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return nil, 0, fmt.Errorf("rdma: address %q: %w", addr, err)
	}
	return ips[0], port, nil
}

// listener is a listening rdma_cm id. Its goroutine accepts every valid
// connection request at once (like a TCP backlog); Accept hands out the
// established ones.
type listener struct {
	t        *Transport
	ch       *eventChannel
	id       cmID
	addr     string
	accepted chan *conn
	closed   chan struct{}
	loopDone chan struct{}
	pending  atomic.Int32 // connections requested and not yet authenticated (Auth)

	mu       sync.Mutex
	isClosed bool
}

func (t *Transport) listen(addr string) (*listener, error) {
	ip, port, err := resolve(context.Background(), addr)
	if err != nil {
		return nil, err
	}
	ch, err := newEventChannel()
	if err != nil {
		return nil, err
	}
	l := &listener{t: t, ch: ch, accepted: make(chan *conn, t.cfg.Backlog),
		closed: make(chan struct{}), loopDone: make(chan struct{})}
	if err := l.start(ip, port); err != nil {
		l.id.destroy()
		ch.wakeUp()
		ch.destroy()
		return nil, fmt.Errorf("rdma: listen %s: %w", addr, err)
	}
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		close(l.loopDone)
		_ = l.Close()
		return nil, errClosedTransport
	}
	t.listeners[l] = struct{}{}
	t.mu.Unlock()
	go l.loop()
	return l, nil
}

func (l *listener) start(ip net.IP, port int) (err error) {
	if l.id, err = createID(l.ch); err != nil {
		return err
	}
	if err := l.id.bind(ip, port); err != nil {
		return err
	}
	// Connection requests inherit the type of service from the listening id
	// (for RoCE the dialer's, carried in its request, takes precedence).
	if err := l.id.setOptions(l.t.cfg.idTOS(), l.t.cfg.idAckExp()); err != nil {
		return err
	}
	if v := l.id.verbs(); v != nil && v != l.t.dev {
		return fmt.Errorf("%w: %v is not on %s", ErrWrongDevice, ip, l.t.name)
	}
	if err := l.id.listen(l.t.cfg.Backlog); err != nil {
		return err
	}
	l.addr = l.id.localAddr()
	return nil
}

func (l *listener) loop() {
	defer close(l.loopDone)
	for {
		ev, err := l.ch.wait(context.Background())
		if err != nil {
			// Woken by Close, or the channel failed: then close the
			// listener so Accept does not wait for nothing.
			go l.Close()
			return
		}
		if ev.kind == evConnectRequest {
			l.request(ev)
		}
	}
}

// request sets up the passive side of one connection and accepts it; the
// connection's watcher queues it for Accept once established.
func (l *listener) request(ev cmEvent) {
	peer, err := parseHello(ev.pdata)
	if err != nil || ev.id.verbs() != l.t.dev {
		ev.id.reject()
		ev.id.destroy()
		return
	}
	ch, err := newEventChannel()
	if err != nil {
		ev.id.reject()
		ev.id.destroy()
		return
	}
	if err := ev.id.migrate(ch); err != nil {
		ev.id.reject()
		ev.id.destroy()
		ch.wakeUp()
		ch.destroy()
		return
	}
	c, err := newConn(l.t, ev.id, ch)
	if err != nil {
		ev.id.reject()
		ev.id.destroy()
		ch.wakeUp()
		ch.destroy()
		return
	}
	c.initAuth()
	// With Auth: admission (a bounded number of unauthenticated
	// connections), the offer for the accept, the deadline.
	pdata, err := l.startAuth(c)
	if err != nil { // no deadline runs yet: nothing else tears c down
		ev.id.reject()
		l.settle(c, err)
		c.fail(err)
		return
	}
	// From here the authentication deadline (Auth.Timeout, which may be
	// short) may tear c down: each use of the id and the queue pair is a
	// step, which teardown waits out.
	err = c.step(func() error {
		// The ACK timeout is the id's own: set it before the QP's RTS.
		err := ev.id.setOptions(-1, l.t.cfg.idAckExp())
		if err == nil {
			err = c.setup()
		}
		if err != nil {
			ev.id.reject()
			return err
		}
		c.connect(peer)
		resp, init := acceptDepths(l.t.attr.maxRdAtom, l.t.attr.maxInitRdAtom, ev.respResources, ev.initDepth)
		// The queue pair gets remote access as initialAccess says: none
		// until the dialer authenticates, with Auth.
		c.auth.remoteQPN, err = ev.id.accept(append(c.hello().encode(), pdata...), resp, init, c.initialAccess(), c.cfg.RetryCount)
		return err
	})
	if err != nil {
		l.settle(c, err)
		c.fail(err)
		return
	}
	if h := l.t.acceptHook.Load(); h != nil {
		(*h)(c)
	}
	c.startWatch(l.onEstablished)
}

func (l *listener) established(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.isClosed {
		select {
		case l.accepted <- c:
			c.ready.Store(true) // the dialer granted READ before its last message
			return
		default: // backlog full
		}
	}
	go c.Close()
}

// Accept returns the next established connection.
func (l *listener) Accept(ctx context.Context) (transport.Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closed:
		return nil, fmt.Errorf("rdma: listener %s closed: %w", l.addr, transport.ErrClosed)
	}
}

func (l *listener) Addr() string { return l.addr }

// Close stops listening and closes connections not yet accepted.
func (l *listener) Close() error {
	l.mu.Lock()
	if l.isClosed {
		l.mu.Unlock()
		return nil
	}
	l.isClosed = true
	close(l.closed)
	l.mu.Unlock()
	l.ch.wakeUp()
	<-l.loopDone
	l.id.destroy()
	l.ch.destroy()
	l.t.mu.Lock()
	delete(l.t.listeners, l)
	l.t.mu.Unlock()
	for {
		select {
		case c := <-l.accepted:
			_ = c.Close()
		default:
			return nil
		}
	}
}
