package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// Reasons a listener refuses a connection or closes one it accepted for
// breaking a limit, as passed to the hook set with SetRefusalHook (a server
// counts and logs them). They are transport's (transport.Reason*), which
// a server counts beside its own; these are the ones this package reports.
const (
	// ReasonMaxConns: the listener already held MaxConns connections.
	ReasonMaxConns = transport.ReasonMaxConns
	// ReasonHandshake: the dialer failed the handshake (TLS or hello) or
	// did not finish it within HandshakeTimeout.
	ReasonHandshake = transport.ReasonHandshake
	// ReasonIdle: nothing arrived for IdleTimeout.
	ReasonIdle = transport.ReasonIdle
	// ReasonRead: a frame did not arrive whole within ReadTimeout.
	ReasonRead = transport.ReasonRead
	// ReasonWrite: the peer took no bytes for WriteTimeout.
	ReasonWrite = transport.ReasonWrite
	// ReasonProtocol: the peer broke the wire protocol.
	ReasonProtocol = transport.ReasonProtocol
	// ReasonReadTooLarge: the peer posted a READ batch of more than
	// transport.MaxReadBatchBytes (a protocol violation of its own kind).
	ReasonReadTooLarge = transport.ReasonReadTooLarge
)

// Limits is implemented by the listeners of this package (the
// transport.Listener that Listen returns): a server sets its own connection
// cap, and hears of every refusal, after Listen.
type Limits interface {
	// SetMaxConns replaces the listener's Config.MaxConns (n <= 0: no
	// limit). Connections it already holds stay open.
	SetMaxConns(n int)
	// SetRefusalHook sets fn (nil: none) to be called with the reason (one
	// of the Reason constants), the remote address and the error, whenever
	// the listener refuses a connection or closes one it accepted for
	// breaking a limit. It is called from the transport's goroutines and
	// must not block.
	SetRefusalHook(fn func(reason, remote string, err error))
}

// IdleTimeouter is implemented by this package's connections: an accepted
// connection's IdleTimeout can be changed (d <= 0: none), e.g. for a peer
// whose traffic may pause for longer. It does nothing on a dialed one.
type IdleTimeouter interface {
	SetIdleTimeout(d time.Duration)
}

var (
	_ Limits        = (*listener)(nil)
	_ IdleTimeouter = (*conn)(nil)
)

// A listener that refuses a connection writes a refusal where its hello
// would be: refuseMagic, a reason code, zeros up to a hello's size (so that a
// dialer reading a hello reads exactly it). A TLS dialer sees it as a record
// header that is not TLS.
const (
	refuseMagic    = "KVDR"
	refuseMaxConns = 1
	// refuseNeedTLS: a TLS listener's answer, in plaintext, to a dialer
	// whose hello says it speaks plaintext (secure): without it the dialer
	// saw the socket close and took the node for unreachable.
	refuseNeedTLS = 2
)

// refusal is what refuse writes.
var refusal = refusalFor(refuseMaxConns)

func refusalFor(code byte) []byte {
	b := make([]byte, helloSize)
	copy(b, refuseMagic)
	b[4] = code
	return b
}

// refusedErr is the dialer's error for a refusal with code.
func refusedErr(code byte) error {
	switch code {
	case refuseMaxConns:
		return fmt.Errorf("%w: it holds as many connections as it allows (its MaxConns; kvd --max-connections)", ErrRefused)
	case refuseNeedTLS:
		return fmt.Errorf("%w: %w: it requires TLS, and this end speaks plaintext (configure TLS here): %w",
			ErrRefused, ErrTLS, transport.ErrAuthRefused)
	}
	return fmt.Errorf("%w (reason %d)", ErrRefused, code)
}

// maxLingering bounds the refused sockets being drained at once; beyond it
// a refused socket is closed at once (its dialer may then see a reset
// rather than the refusal).
const maxLingering = 64

// refuseLinger is how long a refused socket is drained: closing a socket
// with unread input resets it, and the reset can overtake the refusal.
const refuseLinger = 500 * time.Millisecond

// refuse tells the dialer of nc why it is refused and closes nc, draining
// what the dialer sends meanwhile (its hello) for up to refuseLinger.
func (l *listener) refuse(nc net.Conn) {
	_ = nc.SetDeadline(time.Now().Add(refuseLinger))
	if _, err := nc.Write(refusal); err != nil {
		nc.Close()
		return
	}
	select {
	case l.lingering <- struct{}{}:
	default:
		nc.Close()
		return
	}
	l.handlers.Add(1)
	go func() {
		defer l.handlers.Done()
		defer func() { <-l.lingering }()
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
		nc.Close()
	}()
}

// The watchdog enforces IdleTimeout, ReadTimeout and WriteTimeout for every
// connection of a Transport from one goroutine, so that the data path sets
// no socket deadlines and reads no clock: readLoop counts frame boundaries
// (rprog: odd while a frame's payload is due) and socket writes count their
// start and end (wprog: odd while one is in progress). At every tick the
// watchdog notes, per connection, when each count last changed; a count
// that has not moved for longer than its timeout closes the connection. A
// timeout therefore fires between its value and its value plus two ticks.
type watchdog struct {
	t     *Transport
	tick  time.Duration
	epoch time.Time
	stop  chan struct{}
	done  chan struct{}
	conns []*conn // scratch
}

// watchState is what the watchdog noted about one connection; only the
// watchdog touches it once the connection is adopted.
type watchState struct {
	r, w           uint64 // rprog and wprog when last seen changed
	rSince, wSince time.Duration
}

// watchTick picks the watchdog's period: an eighth of the shortest
// timeout, between 5ms and 1s.
func watchTick(cfg Config) time.Duration {
	tick := time.Second
	for _, d := range []time.Duration{cfg.IdleTimeout, cfg.ReadTimeout, cfg.WriteTimeout} {
		if d > 0 {
			tick = min(tick, d/8)
		}
	}
	return max(tick, 5*time.Millisecond)
}

func (t *Transport) startWatchdog() {
	w := &watchdog{t: t, tick: watchTick(t.cfg), epoch: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	t.watch = w
	go w.run()
}

// now is the watchdog's clock.
func (w *watchdog) now() time.Duration { return time.Since(w.epoch) }

func (w *watchdog) run() {
	defer close(w.done)
	tk := time.NewTicker(w.tick)
	defer tk.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tk.C:
		}
		w.conns = w.t.snapshotConns(w.conns[:0])
		now := w.now()
		for _, c := range w.conns {
			c.check(now)
		}
		clear(w.conns) // drop references to closed connections
	}
}

func (w *watchdog) close() {
	close(w.stop)
	<-w.done
}

// check closes c if it broke a timeout; the watchdog calls it.
func (c *conn) check(now time.Duration) {
	cfg, ws := &c.t.cfg, &c.watch
	if r := c.rprog.Load(); r != ws.r {
		ws.r, ws.rSince = r, now
	} else if r&1 == 1 {
		if d := cfg.ReadTimeout; d > 0 && now-ws.rSince > d {
			c.limitFail(ReasonRead, fmt.Errorf("a frame did not arrive whole within %v (ReadTimeout)", d))
			return
		}
	} else if d := time.Duration(c.idle.Load()); d > 0 && now-ws.rSince > d {
		c.limitFail(ReasonIdle, fmt.Errorf("nothing arrived for %v (IdleTimeout)", d))
		return
	}
	if w := c.wprog.Load(); w != ws.w {
		ws.w, ws.wSince = w, now
	} else if w&1 == 1 {
		if d := cfg.WriteTimeout; d > 0 && now-ws.wSince > d {
			c.limitFail(ReasonWrite, fmt.Errorf("the peer took no bytes for %v (WriteTimeout)", d))
		}
	}
}

// limitFail closes c for breaking a timeout and reports it.
func (c *conn) limitFail(reason string, why error) {
	err := fmt.Errorf("tcp: connection to %s: %w: %w (%w)", c.remote, why, ErrTimeout, transport.ErrClosed)
	if c.fail(err, false) {
		c.report(reason, err)
	}
}

// report tells the listener's hook that c was closed for reason: the
// listener that accepted c, or for a connection this transport dialed (a
// node's raft traffic to its peers goes out on those) its first listener,
// the node's own.
func (c *conn) report(reason string, err error) {
	ln := c.ln
	if ln == nil {
		c.t.mu.Lock()
		if len(c.t.listeners) > 0 {
			ln = c.t.listeners[0]
		}
		c.t.mu.Unlock()
	}
	if ln != nil {
		ln.report(reason, c.remote, err)
	}
}

// SetIdleTimeout changes an accepted connection's IdleTimeout (d <= 0:
// none); see IdleTimeouter.
func (c *conn) SetIdleTimeout(d time.Duration) {
	if c.ln != nil {
		c.idle.Store(int64(max(d, 0)))
	}
}

// writeChunk is the most one socket write takes at once, so that a large
// message's progress (not only its end) resets the WriteTimeout.
const writeChunk = 256 << 10

// connWriter is the socket as the buffered writer writes it: it marks every
// socket write in progress for the watchdog.
type connWriter conn

func (w *connWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := min(len(p)-n, writeChunk)
		w.wprog.Add(1)
		m, err := w.nc.Write(p[n : n+k])
		w.wprog.Add(1)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Write buffers are pooled: a connection holds one only while it writes, so
// an idle connection costs no write buffer.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}

// scratch buffers carry large READ responses from the socket to the caller's
// Dst without a read buffer that large per connection.
var scratch = sync.Pool{New: func() any { return new([bufSize]byte) }}

// errReadTooLarge marks a READ_REQ over transport.MaxReadBatchBytes.
var errReadTooLarge = errors.New("READ batch too large")
