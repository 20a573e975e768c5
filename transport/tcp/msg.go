package tcp

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// inMsg is a delivered message waiting for Recv: its payload is data, in
// pooled (a buffer of msgBufs) or, for a message above keepMsgBuf, in a
// buffer of its own.
type inMsg struct {
	data   []byte
	pooled *[]byte
}

// release drops m's buffer: a pooled one goes back to the pool.
func (m *inMsg) release() {
	if m.pooled != nil {
		putMsgBuf(m.pooled)
	}
	m.data, m.pooled = nil, nil
}

// msgQueue is one connection's message flow control. Each end queues at
// most its own Credits messages; the peer's send window starts at that
// number, each MSG costs one credit, and the receiver hands credits back as
// Recv consumes, in CREDIT frames or riding on MSG headers.
type msgQueue struct {
	window  chan struct{} // one token per message the peer will still queue
	queue   chan *inMsg   // delivered, in order
	free    chan *inMsg   // as many as this end grants credits
	pending atomic.Uint32 // consumed here, not yet returned to the peer
	batch   uint32        // pending count that triggers a CREDIT frame
	kick    chan struct{} // asks serveLoop to return pending credits
	idle    *time.Timer   // returns a caught-up receiver's credits delay after its last consume
	delay   time.Duration // creditIdleDelay
	frames  atomic.Uint64 // CREDIT frames written (tests read it)
	// out and in bound the bytes in flight each way (bytewindow.go).
	out, in byteWindow
}

// creditIdleDelay is how long a receiver that has consumed everything waits
// before it returns fewer than a batch of credits in a CREDIT frame of
// their own. A request/response peer answers within it nearly always, and
// the credits ride on the answer's MSG header instead: a frame, a syscall
// and a wake-up at the far end saved per request. It must outlast a busy
// server's answer, not an idle one's: at 2 ms, 64 clients' PUTs (answered
// after an fsync and a Raft round, 10-15 ms at p50 on the project's 2-core
// machine) each cost a CREDIT frame of its own, about a fifth of the
// leader's CPU per PUT (bench: 214 µs of server CPU per PUT at 2 ms, 179 µs
// at 250 ms, medians of five runs). The wait costs nothing: until it ends
// the sender still holds at least three quarters of its window, as a batch
// of credits is returned at once.
const creditIdleDelay = 250 * time.Millisecond

func (q *msgQueue) init(own, peer, maxMessage int, creditDelay time.Duration) {
	q.out.init(windowBytes(maxMessage), peer)
	q.in.init(windowBytes(maxMessage), own)
	q.window = make(chan struct{}, peer)
	for range peer {
		q.window <- struct{}{}
	}
	q.queue = make(chan *inMsg, own)
	q.free = make(chan *inMsg, own)
	q.kick = make(chan struct{}, 1)
	q.delay = creditDelay
	q.idle = time.AfterFunc(time.Hour, q.kickNow)
	q.idle.Stop()
	bufs := make([]inMsg, own)
	for i := range bufs {
		q.free <- &bufs[i]
	}
	// Batching credits saves frames; returning them by a quarter of the
	// window keeps a fast sender from stalling on a slow trickle of them.
	q.batch = uint32(max(1, own/4))
}

// addCredits widens the send window by n returned credits.
func (q *msgQueue) addCredits(n uint32) error {
	for range n {
		select {
		case q.window <- struct{}{}:
		default:
			return protoErr("peer returned more credits than it was sent messages (window %d)", cap(q.window))
		}
	}
	return q.out.release(n)
}

// Send writes msg as one MSG frame once the peer has room for it. If the
// Filter cuts the peer off, msg is dropped and Send reports success.
func (c *conn) Send(ctx context.Context, msg []byte) error { return c.send(ctx, msg, false) }

// SendBatch sends msgs as Send would one after the other, in one socket
// write where the peer's credits and byte window allow (transport.BatchSender).
func (c *conn) SendBatch(ctx context.Context, msgs [][]byte) (int, error) {
	for i, m := range msgs {
		if err := c.send(ctx, m, i < len(msgs)-1); err != nil {
			if i > 0 {
				c.flush() // the ones sent must reach the peer, as Send's do
			}
			return i, err
		}
	}
	return len(msgs), nil
}

// send is Send; with more, it leaves the frame in the write buffer for the
// next send to flush. Frames left there are flushed before any wait for
// credits or window: the peer returns those only for frames it received.
func (c *conn) send(ctx context.Context, msg []byte, more bool) error {
	if len(msg) > c.maxMessage {
		return fmt.Errorf("tcp: message of %d bytes exceeds the connection's max of %d: %w",
			len(msg), c.maxMessage, transport.ErrMessageTooLarge)
	}
	if err := c.usable(ctx); err != nil {
		return err
	}
	if c.cut() {
		return nil
	}
	if !c.takeCredit() {
		c.flush()
		select {
		case <-c.msgs.window:
		case <-ctx.Done():
			return c.usable(ctx)
		case <-c.closed:
			return c.err
		}
	}
	if err := c.msgs.out.reserve(ctx, len(msg), c.closed, c.flush); err != nil {
		c.msgs.window <- struct{}{} // the credit was not used
		return c.usable(ctx)
	}
	c.wlock()
	ret := c.msgs.pending.Swap(0)
	// Counted before a byte is written: a message larger than the write
	// buffer starts going out during the Write, and its peer may return
	// its credit before Write returns.
	c.msgs.out.sent(len(msg))
	if ret > 0 {
		c.msgs.in.returning(ret)
	}
	err := c.writeHeader(header{typ: frameMsg, id: ret, length: uint64(len(msg))})
	if err == nil {
		_, err = c.bw.Write(msg)
	}
	return c.wunlockMore(err, more)
}

// flush writes out what the write buffer holds (unless another writer is
// waiting for it: that one flushes).
func (c *conn) flush() {
	c.wlock()
	c.wunlock(nil) // a write error fails the connection, which its users see
}

// takeCredit takes a credit if one is free, without waiting: the common
// case, which then costs no select over the context and the closure.
func (c *conn) takeCredit() bool {
	select {
	case <-c.msgs.window:
		return true
	default:
		return false
	}
}

// Recv returns the next message appended to buf[:0]. Messages that arrived
// before the peer closed are still returned; after a local Close none are.
func (c *conn) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	m, err := c.next(ctx)
	if err != nil {
		return nil, err
	}
	buf = append(buf[:0], m.data...)
	n := len(m.data)
	m.release()
	c.msgs.free <- m
	c.consumed(n)
	return buf, nil
}

func (c *conn) next(ctx context.Context) (*inMsg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-c.closed:
		return c.leftover()
	default:
	}
	select {
	case m := <-c.msgs.queue: // already delivered: no select over the others
		return m, nil
	default:
	}
	select {
	case m := <-c.msgs.queue:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return c.leftover()
	}
}

// leftover returns a message that arrived before the peer closed, if any.
func (c *conn) leftover() (*inMsg, error) {
	if !c.closedHere {
		select {
		case m := <-c.msgs.queue:
			return m, nil
		default:
		}
	}
	return nil, c.err
}

// usable reports why an operation must not start, or why one that waited
// on ctx stopped: the connection's own error once it has closed, else ctx's.
// A closure so names its cause once: the server, closing a connection for
// its own reply timeout (slow reader), must not also count one this
// transport closed for a limit (WriteTimeout) as both fired together.
func (c *conn) usable(ctx context.Context) error {
	select {
	case <-c.closed:
		return c.err
	default:
		return ctx.Err()
	}
}

// consumed counts one message consumed, and asks serveLoop to return the
// credits when a batch is due, or creditIdleDelay after the receiver has
// caught up (so that an idle receiver leaves the sender its whole window).
// serveLoop writes the CREDIT frame, so Recv never waits on the socket, and
// a MSG the application sends meanwhile takes the credits along instead.
func (c *conn) consumed(n int) {
	q := &c.msgs
	full := q.in.consumed(n) // a quarter of the byte window waits
	switch {
	case q.pending.Add(1) >= q.batch || full:
		q.kickNow()
	case len(q.queue) == 0:
		// Measured from the last consume: under steady request/response
		// traffic it fires only when the traffic stops.
		q.idle.Reset(q.delay)
	}
}

// kickNow asks serveLoop to return the pending credits.
func (q *msgQueue) kickNow() {
	select {
	case q.kick <- struct{}{}:
	default: // a kick is already pending
	}
}

// returnCredits writes a CREDIT frame for the credits no MSG took along.
func (c *conn) returnCredits() error {
	if c.msgs.pending.Load() == 0 {
		return nil
	}
	c.wlock()
	n := c.msgs.pending.Swap(0) // under the lock, in order with Send's
	if n == 0 {
		return c.wunlock(nil)
	}
	c.msgs.frames.Add(1)
	c.msgs.in.returning(n) // before the frame can reach the peer, as in Send
	err := c.writeHeader(header{typ: frameCredit, id: n})
	return c.wunlock(err)
}

// onMsg queues an incoming MSG; readLoop calls it. It never blocks: the
// queue has room for every credit the peer holds.
func (c *conn) onMsg(h header) error {
	if h.id != 0 {
		if err := c.msgs.addCredits(h.id); err != nil {
			return err
		}
	}
	if len(c.msgs.free) == 0 {
		return protoErr("peer sent a message beyond the %d credits it was granted", cap(c.msgs.free))
	}
	n := int(h.length)
	if err := c.msgs.in.received(n); err != nil {
		return err
	}
	if c.cut() {
		// Dropped as if lost on the way, so the credit goes straight back.
		if _, err := c.br.Discard(n); err != nil {
			return err
		}
		c.consumed(n)
		return nil
	}
	m := <-c.msgs.free // only readLoop takes from free
	if err := c.readPayload(m, n); err != nil {
		m.release()
		c.msgs.free <- m
		return err
	}
	c.msgs.queue <- m
	return nil
}

// readPayload reads a MSG's n bytes into m.data. A message of at most
// keepMsgBuf bytes is read into a pooled buffer; a larger one's buffer grows
// as the bytes arrive (doubling from keepMsgBuf), never straight to the
// header's length: a peer that announces a large message and sends little
// of it holds little memory (and ReadTimeout bounds how long it holds it).
func (c *conn) readPayload(m *inMsg, n int) error {
	if n <= keepMsgBuf {
		m.pooled = getMsgBuf(n)
		m.data = *m.pooled
		_, err := io.ReadFull(c.br, m.data)
		return err
	}
	for len(m.data) < n {
		if len(m.data) == cap(m.data) {
			grown := make([]byte, len(m.data), min(n, max(2*cap(m.data), keepMsgBuf)))
			copy(grown, m.data)
			m.data = grown
		}
		k, err := io.ReadFull(c.br, m.data[len(m.data):cap(m.data)])
		m.data = m.data[:len(m.data)+k]
		if err != nil {
			return err
		}
	}
	return nil
}
