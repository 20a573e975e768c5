//go:build rdma

package rdma

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kvd-project/kvd/transport"
)

// conn is one RC queue pair and everything it owns: one off-heap mapping,
// registered for local access only, holding its receive buffers, send
// buffers and credit-message buffers; and, from its first Read on, a second
// one holding its READ staging slots (staging.go).
//
// Locks, outermost first: Transport.cqLife (read, by a goroutine polling for
// its own completion) → cq.mu (whoever drains the CQ: the reaper, such a
// goroutine, teardown) → Transport.connsMu (read, while draining) → mu.
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

	stage      staging      // READ staging, allocated on first use
	stageMu    sync.Mutex   // serialises its allocation
	stageReady atomic.Bool  // stage is allocated (set under stageMu and memMu)
	pinned     atomic.Int64 // bytes of registered memory

	// ready: the peer's queue pair grants remote READ (the connection was
	// handed out), so a keepalive READ will not be refused.
	ready atomic.Bool
	ka    keepAliveState

	// Posting SENDs (sendq.go): sqMu serialises posts to the send queue
	// with their record in sq, so sq's order is the device's; the poller
	// takes it to retire what a completion covers.
	sqMu      sync.Mutex
	sq        sendQueue
	kaPos     uint64 // sq position the outstanding keepalive READ retires to
	fencePos  uint64 // ... and Close's fence
	fenced    bool   // Close posted its fence
	maxInline int    // SENDs of at most this many bytes go inline
	inlined   atomic.Uint64
	signalled atomic.Uint64 // SEND completions (tests)

	// Fixed once connected.
	fragSize int // payload bytes per fragment
	maxMsg   int

	sendSem   chan struct{} // one message on the wire at a time
	wake      chan struct{} // the sender's wake-up: credits or buffers came back
	idle      chan struct{} // Close's wake-up: all sends completed
	rq        chan delivery
	arrived   chan struct{} // Recv's wake-up: a message was queued on rq
	freeSlots chan int
	slots     []readSlot
	// maxReadDepth is the most READ rounds one Read has had in flight.
	maxReadDepth atomic.Int32
	closed       chan struct{}
	done         chan struct{} // teardown finished
	watchDone    chan struct{} // nil until a watcher runs; guarded by mu

	localClose atomic.Bool
	connected  atomic.Bool
	closeOnce  sync.Once

	// setupMu is held by the goroutine setting the connection up (dial,
	// listener.request) across each step that creates or uses the id, the
	// queue pair or the connection's memory (step). The connection is
	// reachable before setup ends (Transport.Close and the poller see it
	// once addConn has run, the authentication timer once startAuth has),
	// so teardown may start meanwhile: it sets torn under setupMu before it
	// disconnects or frees anything, and the setting-up goroutine fails at
	// its next step instead of using what teardown frees.
	setupMu sync.Mutex
	torn    bool
	local   string // local address, as the id saw it when connected
	qpn     uint32 // the queue pair's number

	memMu sync.RWMutex
	freed bool

	mu         sync.Mutex
	err        error // why the connection closed; set before closed is closed
	closing    bool
	bufCredits int     // peer's data receive buffers we may fill
	ctlCredits int     // peer's credit-message buffers we may fill
	msgCredits int     // peer's queue slots we may fill
	granted    credits // what the peer's hello granted: we never hold more
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
	asm       asmState // the fragmented message arriving, as checked so far
	broken    bool     // the peer broke the protocol: ignore what follows

	asmr assembler // copies fragmented messages out (assemble.go)

	auth connAuth // authentication state (auth_conn.go)
}

// delivery is a received message waiting for Recv: either still in receive
// buffer buf (n payload bytes), or reassembled into data (buf < 0). On its
// way to the assembler it may be a fragment (frag) of a message of total
// bytes, with the first and last flags of its header.
type delivery struct {
	buf   int32
	n     int32
	frag  bool
	flags uint8
	total uint32
	data  []byte
}

// Work-request ids: connection id, kind, a sequence byte (read slots) and a
// buffer or slot index.
const (
	kindRecv = 1 + iota
	kindSend
	kindCtl
	kindRead
	kindKeepAlive
	kindFence // Close's zero-length READ, retiring unsignalled SENDs
)

func wrID(conn uint32, kind int, seq uint8, idx int) uint64 {
	return uint64(conn)<<32 | uint64(kind)<<24 | uint64(seq)<<16 | uint64(idx)
}

// step runs f, a step of setting c up, unless teardown has begun.
func (c *conn) step(f func() error) error {
	c.setupMu.Lock()
	defer c.setupMu.Unlock()
	if c.torn {
		return c.closedErr()
	}
	return f()
}

func (c *conn) hello() hello {
	return hello{ctl: ctlBuffers, bufSize: c.cfg.BufSize, recvBuffers: c.cfg.RecvBuffers,
		credits: c.cfg.Credits, maxMessage: c.cfg.MaxMessage}
}

func newConn(t *Transport, id cmID, ch *eventChannel) (*conn, error) {
	// Balanced at the end of teardown. Refused once Close has stopped
	// waiting for connections (it then frees the PD and the CQs).
	if !t.connStarted() {
		return nil, errClosedTransport
	}
	cfg := t.cfg
	c := &conn{
		t: t, cm: id, ch: ch, cfg: cfg,
		nRecv:     cfg.RecvBuffers + ctlBuffers,
		sendSem:   make(chan struct{}, 1),
		wake:      make(chan struct{}, 1),
		idle:      make(chan struct{}, 1),
		rq:        make(chan delivery, cfg.Credits),
		arrived:   make(chan struct{}, 1),
		freeSlots: make(chan int, cfg.ReadSlots),
		slots:     make([]readSlot, cfg.ReadSlots),
		closed:    make(chan struct{}),
		done:      make(chan struct{}),
	}
	c.asmr.init(cfg.RecvBuffers)
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
	c.sq = newSendQueue(cfg.SendBuffers, ctlBuffers, cfg.SignalEvery)
	return c, nil
}

// setup allocates and registers the connection's memory, creates its queue
// pair on id and posts every receive buffer. On error the caller tears c
// down. It runs as a step (c.step).
func (c *conn) setup() error {
	cfg := c.cfg
	c.sendAt = c.nRecv * cfg.BufSize
	c.ctlAt = c.sendAt + cfg.SendBuffers*cfg.BufSize
	size := c.ctlAt + ctlBuffers*64
	mem, err := offHeap(size)
	if err != nil {
		return err
	}
	c.mem, c.base = mem, addrOf(mem)
	if c.mr, err = c.t.pd.register(mem, accessLocal); err != nil {
		return err
	}
	c.lkey = c.mr.lkey()
	c.t.pinned.nConns.Add(1)
	c.addPinned(int64(cap(mem)))
	for i := range c.slots {
		c.slots[i].off = i * cfg.ReadSlotSize
	}
	// Every SEND holds a send or credit-message buffer until retired, every
	// READ chain a slot, and one keepalive READ and one fence at most are
	// outstanding: the send queue cannot overflow.
	sendWR := cfg.SendBuffers + ctlBuffers + cfg.ReadSlots*transport.MaxBatch + 2
	recvWR := c.nRecv
	if c.cq, err = c.t.reserveCQ(sendWR + recvWR); err != nil {
		return err
	}
	c.cqResv = sendWR + recvWR
	if err := c.t.addConn(c); err != nil {
		return err
	}
	if c.qp, c.maxInline, err = c.cm.createQP(c.t.pd, c.cq.h, sendWR, recvWR, max(cfg.MaxInline, 0)); err != nil {
		return err
	}
	c.qpn = c.qp.num()
	if cfg.MaxInline < 0 {
		c.maxInline = 0
	}
	idx := make([]uint16, c.nRecv)
	for i := range idx {
		idx[i] = uint16(i)
	}
	return c.postRecvs(idx)
}

// connect applies the peer's parameters; it reads the id, so it runs in a
// step. (A message the peer sends before this, which the dialing side may
// receive, cannot return credits: we have sent nothing. received checks
// that against granted, zero until now.)
func (c *conn) connect(peer hello) {
	c.mu.Lock()
	c.granted = peer.granted()
	c.bufCredits += peer.recvBuffers
	c.ctlCredits += peer.ctl
	c.msgCredits += peer.credits
	c.mu.Unlock()
	c.fragSize = min(c.cfg.BufSize, peer.bufSize) - headerSize
	c.maxMsg = min(c.cfg.MaxMessage, peer.maxMessage)
	c.remote = c.cm.peerAddr()
	c.local = c.cm.localAddr()
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
		c.retire(uint16(idx))
	case kindCtl:
		c.retire(uint16(idx) | sqCtl)
	case kindRead:
		if idx < len(c.slots) {
			c.readDone(idx, seq, nil)
		}
	case kindKeepAlive:
		c.retireFence(&c.kaPos)
		c.ka.out.Store(false)
	case kindFence:
		c.retireFence(&c.fencePos)
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

func (c *conn) MaxMessage() int    { return c.maxMsg }
func (c *conn) RemoteAddr() string { return c.remote }

var (
	_ transport.Conn        = (*conn)(nil)
	_ transport.BatchSender = (*conn)(nil)
)
