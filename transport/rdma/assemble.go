//go:build rdma

package rdma

import (
	"fmt"
	"sync"

	"github.com/kvd-project/kvd/transport"
)

// The assembler copies a fragmented message out of its receive buffers,
// on a goroutine of the connection's own, so that the completion goroutine
// (one per transport, shared by every connection) copies nothing: a 1 MiB
// message arriving on one connection must not hold up the completions of
// the others, such as a Raft heartbeat or a GET's reply. It reposts each
// buffer as soon as it is copied, so the sender streams without waiting for
// Recv, and delivers the whole message to Recv.
//
// Order: once the poller has routed one delivery to the assembler, it
// routes every later one there too (whole messages included) until the
// assembler has caught up, so Recv sees messages in the order sent.
type assembler struct {
	mu      sync.Mutex
	pending int // deliveries routed to the assembler and not yet handled
	started bool

	q    chan delivery // fragments, and whole messages queued behind them
	stop chan struct{} // teardown: handle what is queued, then exit
	done chan struct{}

	// Owned by the assembler goroutine.
	msg    []byte
	broken bool // the message queue overflowed: deliver nothing more
}

func (a *assembler) init(depth int) {
	a.q = make(chan delivery, depth) // each holds a receive buffer
	a.stop = make(chan struct{})
	a.done = make(chan struct{})
}

// route hands a data delivery to Recv's queue at once, or to the assembler
// if it is a fragment or the assembler has work queued (poller).
func (c *conn) route(d delivery) {
	a := &c.asmr
	a.mu.Lock()
	via := a.pending > 0 || d.frag
	if via {
		a.pending++
		if !a.started {
			a.started = true
			go c.assemble()
		}
	}
	a.mu.Unlock()
	if !via {
		c.deliver(d)
		return
	}
	select {
	case a.q <- d:
	default: // it holds a buffer per entry: the peer ignored its credits
		c.protocolError(fmt.Errorf("rdma: peer exceeded its buffer credits: %w", transport.ErrProtocol))
	}
}

// assemble is the assembler goroutine.
func (c *conn) assemble() {
	a := &c.asmr
	defer close(a.done)
	for {
		select {
		case d := <-a.q:
			c.assembleOne(d, false)
		case <-a.stop:
			for {
				select {
				case d := <-a.q:
					c.assembleOne(d, true)
				default:
					return
				}
			}
		}
	}
}

// assembleOne handles one routed delivery; closing: the connection is
// being torn down, so buffers are not reposted.
func (c *conn) assembleOne(d delivery, closing bool) {
	a := &c.asmr
	defer func() {
		a.mu.Lock()
		a.pending--
		a.mu.Unlock()
	}()
	if a.broken {
		return
	}
	if !d.frag {
		c.forward(d)
		return
	}
	if h := c.t.asmHook.Load(); h != nil {
		(*h)(c)
	}
	if d.flags&flagFirst != 0 {
		a.msg = make([]byte, 0, d.total)
	}
	c.memMu.RLock()
	if c.freed {
		c.memMu.RUnlock()
		return
	}
	a.msg = append(a.msg, c.recvBuf(int(d.buf))[headerSize:headerSize+int(d.n)]...)
	var err error
	if !closing {
		idx := [1]uint16{uint16(d.buf)}
		err = c.qp.postRecvs(c.lkey, c.base, c.cfg.BufSize, idx[:], wrID(c.id, kindRecv, 0, 0))
	}
	c.memMu.RUnlock()
	if err != nil {
		c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
		return
	}
	c.mu.Lock()
	c.owedBuf++
	last := d.flags&flagLast != 0
	if last {
		c.assembling = 0
	}
	c.mu.Unlock()
	c.returnCredits()
	if last {
		msg := a.msg
		a.msg = nil
		c.forward(delivery{buf: -1, data: msg})
	}
}

// forward queues a message for Recv (assembler). The queue holds Credits
// messages, so it can only be full if the peer ignored its message credits;
// then nothing more is delivered.
func (c *conn) forward(d delivery) {
	c.mu.Lock()
	c.queued++
	c.mu.Unlock()
	select {
	case c.rq <- d:
		notify(c.arrived)
	default:
		c.asmr.broken = true
		c.fail(fmt.Errorf("rdma: peer exceeded its message credits: %w (connection closed: %w)", transport.ErrProtocol, transport.ErrClosed))
	}
}

// stopAssembler lets the assembler finish what is queued and waits for it
// (teardown, after the poller has stopped handing it work).
func (c *conn) stopAssembler() {
	a := &c.asmr
	a.mu.Lock()
	started := a.started
	a.mu.Unlock()
	if !started {
		return
	}
	close(a.stop)
	<-a.done
}
