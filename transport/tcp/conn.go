package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/kvd-project/kvd/transport"
)

// bufSize is the size of the write buffers, which connections take from a
// pool only while they write, and of the scratch buffers that carry large
// READ responses. READ data is copied through them in pieces of at most this
// size, which bounds how long a region's lock or a slot's lock is held.
const bufSize = 64 << 10

// readBufSize is the size of each connection's read buffer, the one buffer
// an idle connection keeps: small frames are read many at a time through
// it, large payloads straight into their destination (messages) or through a
// pooled scratch buffer (READ responses).
const readBufSize = 16 << 10

var (
	_ transport.BatchSender = (*conn)(nil)
	_ transport.LimitCloser = (*conn)(nil)
)

// conn is one connection. Two goroutines run per conn: readLoop, the only
// reader of the socket, which never blocks on anything but the socket; and
// serveLoop, which writes READ responses and returned credits. Writers share
// bw under wmu.
type conn struct {
	t          *Transport
	nc         net.Conn            // the byte stream: the socket, or TLS over it
	sock       net.Conn            // if TLS, the socket under nc; closing it ends the conn
	id         *transport.Identity // if TLS, the remote end's
	remote     string              // RemoteAddr
	local      string              // Node names, for the Filter
	peer       string
	maxMessage int
	ln         *listener // the listener that accepted the conn; nil if dialed

	// Progress counts for the watchdog (limits.go): rprog counts frame
	// boundaries (odd while a frame's payload is due), wprog socket writes'
	// starts and ends (odd while one is in progress). idle is the
	// IdleTimeout in ns, 0 for none.
	rprog, wprog atomic.Uint64
	idle         atomic.Int64
	watch        watchState // the watchdog's own

	br   *bufio.Reader
	rhdr [headerSize]byte                  // readLoop's scratch
	rreq [opSize * transport.MaxBatch]byte // readLoop's READ_REQ payload

	wmu      sync.Mutex
	wwaiting atomic.Int32     // goroutines waiting for wmu; the last one out flushes
	bw       *bufio.Writer    // guarded by wmu; from writers, nil while no one writes
	whdr     [headerSize]byte // guarded by wmu
	// posted: READ requests wait in bw for serveLoop to flush them, and it
	// has been (or is being) kicked through flushKick. Guarded by wmu.
	posted    bool
	flushKick chan struct{}
	// inflight counts the Reads between posting and their response; a
	// Read posted alone flushes at once (wunlockPosted).
	inflight atomic.Int32

	msgs  msgQueue
	reads readSlots
	serve serveQueue

	closed     chan struct{}
	closeOnce  sync.Once
	err        error // why the conn closed; written before closed is closed
	closedHere bool  // closed by this end; written before closed is closed
	loops      sync.WaitGroup
}

var (
	_ transport.Conn       = (*conn)(nil)
	_ transport.Identified = (*conn)(nil)
)

func newConn(t *Transport, nc net.Conn, remote string, local, peer hello) *conn {
	c := &conn{
		t:          t,
		nc:         nc,
		remote:     remote,
		local:      local.node,
		peer:       peer.node,
		maxMessage: int(min(local.maxMessage, peer.maxMessage)),
		br:         bufio.NewReaderSize(nc, readBufSize),
		closed:     make(chan struct{}),
		flushKick:  make(chan struct{}, 1),
	}
	c.msgs.init(int(local.credits), int(peer.credits), c.maxMessage, t.creditDelay)
	c.reads.init(int(min(local.maxReads, peer.maxReads)))
	c.serve.init(int(local.maxReads))
	now := t.watch.now()
	c.watch.rSince, c.watch.wSince = now, now
	return c
}

// start runs the connection's goroutines; adopt has counted them.
func (c *conn) start() {
	go c.readLoop()
	go c.serveLoop()
}

func (c *conn) MaxMessage() int    { return c.maxMessage }
func (c *conn) RemoteAddr() string { return c.remote }

// Identity reports what TLS established about the remote end; the zero
// Identity for a plaintext connection.
func (c *conn) Identity() transport.Identity {
	if c.id == nil {
		return transport.Identity{}
	}
	return *c.id
}

// Close closes the socket, fails pending operations on this end with
// ErrClosed (the peer's fail when it sees the socket close), and waits for
// the connection's goroutines.
func (c *conn) Close() error {
	c.fail(fmt.Errorf("tcp: connection to %s closed by this end: %w", c.remote, transport.ErrClosed), true)
	c.loops.Wait()
	return nil
}

// CloseForLimit closes the connection for an application's limit,
// reporting whether this call closed it (transport.LimitCloser): a limit
// of this transport's that fires at the same moment then finds it closed
// and is not counted beside it, or closed it first and the caller's is not.
func (c *conn) CloseForLimit(err error) bool {
	closed := c.fail(fmt.Errorf("tcp: connection to %s closed by this end: %w (%w)", c.remote, err, transport.ErrClosed), true)
	c.loops.Wait()
	return closed
}

// fail closes the connection once, recording why; it reports whether this
// call closed it.
func (c *conn) fail(err error, local bool) (closed bool) {
	c.closeOnce.Do(func() {
		closed = true
		c.err, c.closedHere = err, local
		// Socket first: whoever sees closed must find writes failing. Under
		// TLS the socket itself is closed, with no close_notify alert,
		// which could block on a peer that reads nothing (the peer sees
		// EOF, as without TLS).
		if c.sock != nil {
			c.sock.Close()
		} else {
			c.nc.Close()
		}
		close(c.closed)
		if c.msgs.idle != nil {
			c.msgs.idle.Stop()
		}
		c.t.forget(c)
		if c.ln != nil {
			c.ln.release()
		}
	})
	return closed
}

// cut reports whether the Filter separates the two ends.
func (c *conn) cut() bool { return c.t.cut(c.local, c.peer) }

// wlock takes the writer. Callers write whole frames, then call wunlock.
func (c *conn) wlock() {
	c.wwaiting.Add(1)
	c.wmu.Lock()
	c.wwaiting.Add(-1)
	if c.bw == nil {
		c.bw = writers.Get().(*bufio.Writer)
		c.bw.Reset((*connWriter)(c))
	}
}

// wunlock flushes unless another writer is waiting (it will flush), and
// releases the writer; once flushed, its buffer goes back to the pool. A
// write error, or werr, fails the connection.
func (c *conn) wunlock(werr error) error { return c.wunlockMore(werr, false) }

// wunlockMore is wunlock for a writer that knows it will write again at
// once (more: serveLoop with READ batches queued), which then flushes what
// both wrote in one socket write.
func (c *conn) wunlockMore(werr error, more bool) error {
	if werr == nil && !more && c.wwaiting.Load() == 0 {
		if werr = c.bw.Flush(); werr == nil {
			c.bw.Reset(nil)
			writers.Put(c.bw)
			c.bw = nil
		}
	}
	c.wmu.Unlock()
	if werr != nil {
		c.fail(fmt.Errorf("tcp: connection to %s: write: %v: %w", c.remote, werr, transport.ErrClosed), false)
		return c.err
	}
	return nil
}

// wunlockPosted releases the writer after a READ request, leaving the
// flush to serveLoop (flushPosted): Reads posted by goroutines that are
// ready to run meanwhile go out in the same socket write, and the peer
// reads them, and may answer them, together. A Read posted alone (no
// other in flight, none waiting for serveLoop's flush) flushes itself:
// no batch is likely to form, and handing the flush to serveLoop would
// put a goroutine switch, and after an idle spell a thread's wake-up, on
// the READ's path (BenchmarkGetAfterPause in client). A write error fails
// the connection, as in wunlock.
func (c *conn) wunlockPosted(werr error, alone bool) error {
	if werr != nil || (alone && !c.posted) {
		return c.wunlock(werr)
	}
	kick := !c.posted
	c.posted = true
	c.wmu.Unlock()
	if kick {
		// Only the writer that set posted kicks, and serveLoop clears it
		// only after taking the kick: the channel has room.
		c.flushKick <- struct{}{}
	}
	return nil
}

// flushPosted is serveLoop's flush of posted READ requests. It first lets
// every goroutine that is ready to run do so, so that the Reads among them
// join the write; with nothing else ready it flushes at once.
func (c *conn) flushPosted() error {
	runtime.Gosched()
	c.wlock()
	c.posted = false
	return c.wunlock(nil)
}

// writeHeader writes a frame header; the caller holds the writer.
func (c *conn) writeHeader(h header) error {
	h.put(c.whdr[:])
	_, err := c.bw.Write(c.whdr[:])
	return err
}

// readLoop reads frames until the socket fails or the peer breaks the
// protocol, then fails the connection.
func (c *conn) readLoop() {
	defer c.loops.Done()
	err := c.readFrames()
	switch {
	case errors.Is(err, transport.ErrProtocol):
		err = fmt.Errorf("tcp: connection to %s: %w (%w)", c.remote, err, transport.ErrClosed)
		if c.fail(err, false) {
			reason := ReasonProtocol
			if errors.Is(err, errReadTooLarge) {
				reason = ReasonReadTooLarge
			}
			c.report(reason, err)
		}
		return
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("tcp: connection to %s closed by the peer: %w", c.remote, transport.ErrClosed)
	default:
		err = fmt.Errorf("tcp: connection to %s: read: %v: %w", c.remote, err, transport.ErrClosed)
	}
	c.fail(err, false)
}

func (c *conn) readFrames() error {
	for {
		if _, err := io.ReadFull(c.br, c.rhdr[:]); err != nil {
			return err
		}
		h, err := parseHeader(c.rhdr[:], c.maxMessage)
		if err != nil {
			return err
		}
		// Odd while the payload is due, which ReadTimeout bounds.
		due := h.length > 0 && uint64(c.br.Buffered()) < h.length
		if due {
			c.rprog.Add(1)
		}
		switch h.typ {
		case frameMsg:
			err = c.onMsg(h)
		case frameCredit:
			err = c.msgs.addCredits(h.id)
		case frameReadReq:
			err = c.onReadReq(h)
		case frameReadResp:
			err = c.onReadResp(h)
		}
		if err != nil {
			return err
		}
		if due { // a frame ended: even again, and changed
			c.rprog.Add(1)
		} else {
			c.rprog.Add(2)
		}
	}
}
