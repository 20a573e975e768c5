//go:build rdma

package rdma

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// conn is one RC queue pair and everything it owns: one off-heap mapping,
// registered for local access only, holding its receive buffers, send
// buffers, credit-message buffers and READ staging slots.
//
// Locks, outermost first: Transport.connsMu (read, by the poller) → mu.
// memMu guards the mapping and the queue pair against teardown: whoever
// touches the buffers or posts work requests read-holds it and checks freed.
// Fields marked "poller" are only touched by the goroutine draining the CQ
// (under cq.mu).
type conn struct {
	t      *Transport
	id     uint32
	cm     cmID
	ch     *eventChannel
	cfg    Config
	remote string

	qp     qpHandle
	cq     *cq
	cqResv int
	mem    []byte
	mr     mr
	lkey   uint32
	base   uint64
	nRecv  int // receive buffers: cfg.RecvBuffers + ctlBuffers
	sendAt int // offset of the send buffers
	ctlAt  int // offset of the credit-message buffers
	slotAt int // offset of the read slots

	// Fixed once connected.
	fragSize int // payload bytes per fragment
	maxMsg   int

	sendSem   chan struct{} // one message on the wire at a time
	wake      chan struct{} // the sender's wake-up: credits or buffers came back
	idle      chan struct{} // Close's wake-up: all sends completed
	rq        chan delivery
	freeSlots chan int
	slots     []readSlot
	closed    chan struct{}
	done      chan struct{} // teardown finished
	watchDone chan struct{} // nil until a watcher runs

	localClose atomic.Bool
	connected  atomic.Bool
	closeOnce  sync.Once

	memMu sync.RWMutex
	freed bool

	mu         sync.Mutex
	err        error // why the connection closed; set before closed is closed
	closing    bool
	bufCredits int // peer's data receive buffers we may fill
	ctlCredits int // peer's credit-message buffers we may fill
	msgCredits int // peer's queue slots we may fill
	sendFree   []uint16
	ctlFree    []uint16
	inflight   int // SENDs posted and not completed
	owedBuf    int // receive credits to return: data buffers reposted
	owedCtl    int // ... credit-message buffers reposted
	owedMsg    int // ... messages consumed by Recv
	held       int // receive buffers held by queued messages
	queued     int // messages in rq
	assembling int // 1 while a fragmented message is being reassembled

	// poller
	inBatch   bool
	repost    []uint16
	freedSend []uint16
	freedCtl  []uint16
	inBuf     int
	inCtl     int
	inMsg     int
	newBuf    int
	newCtl    int
	asm       []byte
	asmTotal  int
}

// delivery is a received message waiting for Recv: either still in receive
// buffer buf (n payload bytes), or reassembled into data (buf < 0).
type delivery struct {
	buf  int32
	n    int32
	data []byte
}

// Work-request ids: connection id, kind, a sequence byte (read slots) and a
// buffer or slot index.
const (
	kindRecv = 1 + iota
	kindSend
	kindCtl
	kindRead
)

func wrID(conn uint32, kind int, seq uint8, idx int) uint64 {
	return uint64(conn)<<32 | uint64(kind)<<24 | uint64(seq)<<16 | uint64(idx)
}

// hello is the private data exchanged by rdma_connect/rdma_accept: what the
// sender of it can receive.
type hello struct {
	ctl, bufSize, recvBuffers, credits, maxMessage int
}

const (
	helloMagic   = 0x5244564b // "KVDR" little-endian
	helloVersion = 1
	helloSize    = 24
)

func (h hello) encode() []byte {
	b := make([]byte, helloSize)
	le.PutUint32(b[0:], helloMagic)
	le.PutUint16(b[4:], helloVersion)
	le.PutUint16(b[6:], uint16(h.ctl))
	le.PutUint32(b[8:], uint32(h.bufSize))
	le.PutUint32(b[12:], uint32(h.recvBuffers))
	le.PutUint32(b[16:], uint32(h.credits))
	le.PutUint32(b[20:], uint32(h.maxMessage))
	return b
}

func parseHello(b []byte) (hello, error) {
	if len(b) < helloSize || le.Uint32(b) != helloMagic {
		return hello{}, fmt.Errorf("rdma: peer is not a kvd rdma transport: %w", transport.ErrProtocol)
	}
	if v := le.Uint16(b[4:]); v != helloVersion {
		return hello{}, fmt.Errorf("rdma: peer speaks version %d, want %d: %w", v, helloVersion, transport.ErrProtocol)
	}
	h := hello{
		ctl:         int(le.Uint16(b[6:])),
		bufSize:     int(le.Uint32(b[8:])),
		recvBuffers: int(le.Uint32(b[12:])),
		credits:     int(le.Uint32(b[16:])),
		maxMessage:  int(le.Uint32(b[20:])),
	}
	if h.ctl < 1 || h.bufSize < minBufSize || h.recvBuffers < 1 || h.credits < 1 {
		return hello{}, fmt.Errorf("rdma: peer sent bad parameters %+v: %w", h, transport.ErrProtocol)
	}
	return h, nil
}

func (c *conn) hello() hello {
	return hello{ctl: ctlBuffers, bufSize: c.cfg.BufSize, recvBuffers: c.cfg.RecvBuffers,
		credits: c.cfg.Credits, maxMessage: c.cfg.MaxMessage}
}

func newConn(t *Transport, id cmID, ch *eventChannel) *conn {
	cfg := t.cfg
	c := &conn{
		t: t, cm: id, ch: ch, cfg: cfg,
		nRecv:     cfg.RecvBuffers + ctlBuffers,
		sendSem:   make(chan struct{}, 1),
		wake:      make(chan struct{}, 1),
		idle:      make(chan struct{}, 1),
		rq:        make(chan delivery, cfg.Credits),
		freeSlots: make(chan int, cfg.ReadSlots),
		slots:     make([]readSlot, cfg.ReadSlots),
		closed:    make(chan struct{}),
		done:      make(chan struct{}),
	}
	t.connStarted() // balanced at the end of teardown
	for i := range c.slots {
		c.slots[i].done = make(chan struct{}, 1)
		c.freeSlots <- i
	}
	for i := cfg.SendBuffers - 1; i >= 0; i-- {
		c.sendFree = append(c.sendFree, uint16(i))
	}
	for i := ctlBuffers - 1; i >= 0; i-- {
		c.ctlFree = append(c.ctlFree, uint16(i))
	}
	return c
}

// setup allocates and registers the connection's memory, creates its queue
// pair on id and posts every receive buffer. On error the caller tears c
// down.
func (c *conn) setup() error {
	cfg := c.cfg
	c.sendAt = c.nRecv * cfg.BufSize
	c.ctlAt = c.sendAt + cfg.SendBuffers*cfg.BufSize
	c.slotAt = c.ctlAt + ctlBuffers*64
	size := c.slotAt + cfg.ReadSlots*cfg.ReadSlotSize
	mem, err := offHeap(size)
	if err != nil {
		return err
	}
	c.mem, c.base = mem, addrOf(mem)
	if c.mr, err = c.t.pd.register(mem, accessLocal); err != nil {
		return err
	}
	c.lkey = c.mr.lkey()
	for i := range c.slots {
		c.slots[i].off = c.slotAt + i*cfg.ReadSlotSize
	}
	sendWR := cfg.SendBuffers + ctlBuffers + cfg.ReadSlots*transport.MaxBatch
	recvWR := c.nRecv
	if c.cq, err = c.t.reserveCQ(sendWR + recvWR); err != nil {
		return err
	}
	c.cqResv = sendWR + recvWR
	if err := c.t.addConn(c); err != nil {
		return err
	}
	if c.qp, err = c.cm.createQP(c.t.pd, c.cq.h, sendWR, recvWR); err != nil {
		return err
	}
	idx := make([]uint16, c.nRecv)
	for i := range idx {
		idx[i] = uint16(i)
	}
	return c.postRecvs(idx)
}

// connect applies the peer's parameters. Credits are added, not set: the
// peer may already have returned some.
func (c *conn) connect(peer hello) {
	c.mu.Lock()
	c.bufCredits += peer.recvBuffers
	c.ctlCredits += peer.ctl
	c.msgCredits += peer.credits
	c.mu.Unlock()
	c.fragSize = min(c.cfg.BufSize, peer.bufSize) - headerSize
	c.maxMsg = min(c.cfg.MaxMessage, peer.maxMessage)
	c.remote = c.cm.peerAddr()
}

func (c *conn) recvBuf(i int) []byte {
	off := i * c.cfg.BufSize
	return c.mem[off : off+c.cfg.BufSize]
}

func (c *conn) sendBuf(i int) []byte {
	off := c.sendAt + i*c.cfg.BufSize
	return c.mem[off : off+c.cfg.BufSize]
}

func (c *conn) ctlBuf(i int) []byte {
	off := c.ctlAt + i*64
	return c.mem[off : off+headerSize]
}

// postRecvs (re)posts receive buffers, a bounded chain per crossing.
func (c *conn) postRecvs(idx []uint16) error {
	c.memMu.RLock()
	defer c.memMu.RUnlock()
	if c.freed {
		return c.closedErr()
	}
	for len(idx) > 0 {
		n := min(len(idx), 64)
		if err := c.qp.postRecvs(c.lkey, c.base, c.cfg.BufSize, idx[:n], wrID(c.id, kindRecv, 0, 0)); err != nil {
			return err
		}
		idx = idx[n:]
	}
	return nil
}

// complete handles one completion (poller).
func (c *conn) complete(id uint64, status, byteLen int) {
	kind, seq, idx := int(id>>24&0xff), uint8(id>>16), int(uint16(id))
	if status != wcSuccess {
		err := completionError(kind, status)
		if kind == kindRead && idx < len(c.slots) {
			c.readDone(idx, seq, err)
		}
		c.fail(err)
		return
	}
	switch kind {
	case kindRecv:
		c.received(idx, byteLen)
	case kindSend:
		c.freedSend = append(c.freedSend, uint16(idx))
	case kindCtl:
		c.freedCtl = append(c.freedCtl, uint16(idx))
	case kindRead:
		if idx < len(c.slots) {
			c.readDone(idx, seq, nil)
		}
	}
}

// completionError turns a failed completion into an error that wraps
// ErrClosed (the queue pair is in error, so the connection is lost) and, for
// a READ the peer refused, ErrBadKey.
func completionError(kind, status int) error {
	what := wcStatusString(status)
	switch {
	case status == wcFlushErr:
		return fmt.Errorf("rdma: work request flushed: %w", transport.ErrClosed)
	case kind == kindRead && (status == wcRemAccessErr || status == wcRemInvReqErr):
		return fmt.Errorf("rdma: READ refused by peer (%s): %w; connection lost: %w", what, transport.ErrBadKey, transport.ErrClosed)
	case status == wcRetryExcErr:
		return fmt.Errorf("rdma: peer unreachable (%s): %w", what, transport.ErrClosed)
	case status == wcRnrRetryExcErr:
		return fmt.Errorf("rdma: peer had no receive buffer (%s; a flow-control bug): %w", what, transport.ErrClosed)
	}
	return fmt.Errorf("rdma: completion error %q (status %d): %w", what, status, transport.ErrClosed)
}

var (
	errLocalClose = fmt.Errorf("rdma: connection closed: %w", transport.ErrClosed)
	errPeerClose  = fmt.Errorf("rdma: connection closed by peer: %w", transport.ErrClosed)
)

func (c *conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return errLocalClose
	}
	return c.err
}

// fail closes the connection because of cause: every waiter wakes and fails,
// and teardown runs in the background (fail may be called by the poller,
// which teardown waits for).
func (c *conn) fail(cause error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.err = cause
		c.mu.Unlock()
		close(c.closed)
		go c.teardown()
	})
}

// closeLinger bounds how long Close waits for posted SENDs to be
// acknowledged, so that messages sent just before Close still arrive.
const closeLinger = 2 * time.Second

// Close lets posted SENDs complete, then disconnects (the peer's pending and
// later operations fail with ErrClosed) and frees everything.
func (c *conn) Close() error {
	c.mu.Lock()
	c.closing = true
	pending := c.inflight > 0 && c.err == nil
	c.mu.Unlock()
	if pending {
		timer := time.NewTimer(closeLinger)
		select {
		case <-c.idle:
		case <-c.closed:
		case <-timer.C:
		}
		timer.Stop()
	}
	c.localClose.Store(true)
	c.fail(errLocalClose)
	<-c.done
	return nil
}

// teardown frees everything in order: queue pair (after disconnecting), the
// CQ's stale entries and reservation, memory registration and mapping, id,
// event channel.
func (c *conn) teardown() {
	if c.cm.valid() && c.connected.Load() {
		c.cm.disconnect()
	}
	if c.ch != nil {
		c.ch.wakeUp()
	}
	if c.watchDone != nil {
		<-c.watchDone
	}
	c.t.removeConn(c)
	c.memMu.Lock()
	c.keepQueued()
	c.freed = true
	if c.qp.q != nil {
		c.cm.destroyQP()
	}
	c.memMu.Unlock()
	if c.cq != nil {
		c.t.drain(c.cq) // the QP is gone; drop what it left behind
		c.t.releaseCQ(c.cq, c.cqResv)
	}
	if c.mr.m != nil {
		_ = c.mr.deregister()
	}
	if c.mem != nil {
		freeOffHeap(c.mem)
	}
	c.cm.destroy()
	if c.ch != nil {
		c.ch.destroy()
	}
	close(c.done)
	c.t.connDone()
}

// keepQueued copies messages still in receive buffers to the Go heap, so
// Recv can hand out what arrived before the peer closed (memMu held).
func (c *conn) keepQueued() {
	n := len(c.rq)
	for range n {
		select {
		case d := <-c.rq:
			if d.buf >= 0 {
				d.data = append([]byte(nil), c.recvBuf(int(d.buf))[headerSize:headerSize+int(d.n)]...)
				d.buf = -1
			}
			c.rq <- d
		default:
		}
	}
}

// watch handles connection-manager events for the connection's life.
// established runs once the connection is up (passive side).
func (c *conn) watch(established func(*conn)) {
	defer close(c.watchDone)
	for {
		ev, err := c.ch.wait(context.Background())
		if err != nil {
			return
		}
		switch ev.kind {
		case evEstablished:
			if established != nil {
				c.connected.Store(true)
				established(c)
			}
		case evDisconnected:
			// Messages the peer sent before disconnecting completed
			// before this event; reap them so Recv can still return them.
			c.t.drain(c.cq)
			c.fail(errPeerClose)
		case evDeviceRemoval:
			c.fail(fmt.Errorf("rdma: device removed: %w", transport.ErrClosed))
		case evRejected, evConnectError, evUnreachable:
			c.fail(fmt.Errorf("rdma: connection failed: %v: %w", ev, transport.ErrClosed))
		}
	}
}

func (c *conn) MaxMessage() int    { return c.maxMsg }
func (c *conn) RemoteAddr() string { return c.remote }

var _ transport.Conn = (*conn)(nil)
