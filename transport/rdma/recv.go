//go:build rdma

package rdma

import (
	"context"
	"fmt"

	"github.com/kvd-project/kvd/transport"
)

// received handles one arrived SEND in receive buffer i (poller). A message
// that fits one buffer stays there until Recv copies it out; fragments of a
// larger one go to the connection's assembler (assemble.go), which copies
// them out and reposts their buffers: the poller copies nothing. A SEND
// that breaks the protocol closes the connection, and nothing after it is
// delivered.
func (c *conn) received(i, byteLen int) {
	if c.broken {
		return
	}
	h, payload, err := checkFragment(c.recvBuf(i), byteLen, c.rxLimits(), c.asm)
	if err != nil {
		c.protocolError(err)
		return
	}
	// The credits it returns are checked before anything is delivered, and
	// applied by afterBatch, after this burst's receive buffers are reposted.
	whole := h.kind == msgData && h.flags == flagFirst|flagLast
	c.mu.Lock()
	have := credits{buf: c.bufCredits + c.inBuf, ctl: c.ctlCredits + c.inCtl, msg: c.msgCredits + c.inMsg}
	err = addReturned(&have, h.returned(), c.granted)
	if err == nil && whole {
		c.held++
	}
	c.mu.Unlock()
	if err != nil {
		c.protocolError(err)
		return
	}
	c.inBuf += int(h.retBuf)
	c.inCtl += int(h.retCtl)
	c.inMsg += int(h.retMsg)
	switch {
	case h.kind == msgCtl:
		c.repost = append(c.repost, uint16(i))
		c.newCtl++
	case whole:
		c.route(delivery{buf: int32(i), n: int32(len(payload))})
	default:
		c.advance(h, len(payload))
		c.route(delivery{buf: int32(i), n: int32(len(payload)), frag: true, flags: h.flags, total: h.total})
	}
}

// advance moves the checked state of the fragmented message arriving past
// one fragment (checkFragment has checked it fits). From its first fragment
// until the assembler delivers it, the message counts as queued for the
// credits Recv owes (assembling).
func (c *conn) advance(h header, n int) {
	if h.flags&flagFirst != 0 {
		c.asm = asmState{active: true, total: int(h.total)}
		c.mu.Lock()
		c.assembling = 1
		c.mu.Unlock()
	}
	c.asm.have += n
	if h.flags&flagLast != 0 {
		c.asm = asmState{}
	}
}

func (c *conn) rxLimits() rxLimits {
	return rxLimits{bufSize: c.cfg.BufSize, maxMessage: c.rxMaxMessage()}
}

// protocolError closes the connection because the peer broke the protocol
// (poller).
func (c *conn) protocolError(err error) {
	c.broken = true
	c.fail(fmt.Errorf("%w (connection closed: %w)", err, transport.ErrClosed))
}

// deliver queues a message for Recv. The queue holds Credits messages, so
// it can only be full if the peer ignored its message credits.
func (c *conn) deliver(d delivery) {
	c.mu.Lock()
	c.queued++
	c.mu.Unlock()
	select {
	case c.rq <- d:
		notify(c.arrived)
	default:
		c.protocolError(fmt.Errorf("rdma: peer exceeded its message credits: %w", transport.ErrProtocol))
	}
}

// afterBatch runs once per burst of completions for c (poller): it reposts
// consumed receive buffers, and only then counts them as owed and applies
// the credits the peer returned. That order matters: a credit message whose
// buffer we have reposted is owed back before our sender can use the
// credits it carried, so the next data message returns it.
func (c *conn) afterBatch() {
	c.ka.activity.Add(1)
	if len(c.repost) > 0 {
		if err := c.postRecvs(c.repost); err != nil {
			c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
		}
		c.repost = c.repost[:0]
	}
	c.mu.Lock()
	c.owedBuf += c.newBuf
	c.owedCtl += c.newCtl
	c.bufCredits += c.inBuf // checked by received
	c.ctlCredits += c.inCtl
	c.msgCredits += c.inMsg
	c.sendFree = append(c.sendFree, c.freedSend...)
	c.ctlFree = append(c.ctlFree, c.freedCtl...)
	c.inflight -= len(c.freedSend) + len(c.freedCtl)
	wake := c.inBuf > 0 || c.inMsg > 0 || len(c.freedSend) > 0
	idle := c.closing && c.inflight == 0
	c.mu.Unlock()
	c.newBuf, c.newCtl, c.inBuf, c.inCtl, c.inMsg = 0, 0, 0, 0, 0
	c.freedSend, c.freedCtl = c.freedSend[:0], c.freedCtl[:0]
	if wake {
		notify(c.wake)
	}
	if idle {
		notify(c.idle)
	}
	c.returnCredits()
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Recv returns the next message appended to buf[:0]. After the peer closes,
// messages that arrived before are still returned, then the close error;
// after a local Close, only the error.
//
// A message is taken off rq only with memMu read-held: teardown moves what
// is queued out of the receive buffers under memMu before freeing them, so
// a message taken just before that must be copied before teardown can run,
// or it would be lost (its buffer freed under it).
func (c *conn) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	for {
		out, ok, err := c.take(buf)
		if ok || err != nil {
			return out, err
		}
		if ctx.Err() == nil {
			c.spinWait(func() bool { return len(c.rq) > 0 })
		}
		select {
		case <-c.arrived:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			// Once teardown is done, everything that arrived before the
			// close is on rq: the assembler has delivered what it held.
			<-c.done
			out, ok, err := c.take(buf)
			if ok || err != nil {
				return out, err
			}
			return nil, c.closedErr()
		}
	}
}

// take returns the next queued message if there is one (ok), copied out
// of its receive buffer under memMu.
func (c *conn) take(buf []byte) (out []byte, ok bool, err error) {
	c.memMu.RLock()
	var d delivery
	select {
	case d = <-c.rq:
	default:
		c.memMu.RUnlock()
		return nil, false, nil
	}
	if len(c.rq) > 0 {
		notify(c.arrived) // another Recv may be waiting for the next one
	}
	if h := c.t.takeHook; h != nil {
		h(c)
	}
	if c.localClose.Load() {
		c.memMu.RUnlock()
		return nil, false, c.closedErr()
	}
	if d.buf < 0 {
		c.memMu.RUnlock()
		// A reassembled message is already a buffer of its own: when buf
		// cannot hold it, appending would only copy it into a new one.
		if cap(buf) < len(d.data) {
			buf = d.data
		} else {
			buf = append(buf[:0], d.data...)
		}
		c.mu.Lock()
		c.queued--
		c.owedMsg++
		c.mu.Unlock()
		c.returnCredits()
		return buf, true, nil
	}
	if c.freed { // teardown moved every queued message out: cannot happen
		c.memMu.RUnlock()
		return nil, false, c.closedErr()
	}
	buf = append(buf[:0], c.recvBuf(int(d.buf))[headerSize:headerSize+int(d.n)]...)
	idx := [1]uint16{uint16(d.buf)}
	err = c.qp.postRecvs(c.lkey, c.base, c.cfg.BufSize, idx[:], wrID(c.id, kindRecv, 0, 0))
	c.memMu.RUnlock()
	if err != nil {
		c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
		return nil, false, c.closedErr()
	}
	c.mu.Lock()
	c.held--
	c.queued--
	c.owedBuf++
	c.owedMsg++
	c.mu.Unlock()
	c.returnCredits()
	return buf, true, nil
}
