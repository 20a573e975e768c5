//go:build rdma

package rdma

import (
	"context"
	"fmt"

	"github.com/kvd-project/kvd/transport"
)

// maxChain bounds the SENDs posted by one crossing.
const maxChain = 16

// Send copies msg into registered send buffers, as many fragments as the
// peer's receive buffers allow, and posts them. A message cannot be taken
// back once its first fragment is posted, so if ctx ends after that the
// connection is closed (the peer never sees a torn message); before that,
// Send just returns ctx's error. Progress within a message depends only on
// the peer's poller reposting buffers, not on its application.
func (c *conn) Send(ctx context.Context, msg []byte) error {
	if err := c.checkSize(msg); err != nil {
		return err
	}
	if err := c.takeTurn(ctx); err != nil {
		return err
	}
	defer func() { <-c.sendSem }()
	return c.sendInTurn(ctx, msg)
}

// SendBatch sends msgs in order, each as Send does, within one turn of
// the connection's sender (transport.BatchSender): another goroutine's
// message does not come between them. Each is still its own chain of
// SENDs: the batch saves the turn-taking, not the posts.
func (c *conn) SendBatch(ctx context.Context, msgs [][]byte) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	if err := c.takeTurn(ctx); err != nil {
		return 0, err
	}
	defer func() { <-c.sendSem }()
	for i, m := range msgs {
		if err := c.checkSize(m); err != nil {
			return i, err
		}
		if err := c.sendInTurn(ctx, m); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

func (c *conn) checkSize(msg []byte) error {
	if len(msg) > c.maxMsg {
		return fmt.Errorf("rdma: send of %d bytes (max %d): %w", len(msg), c.maxMsg, transport.ErrMessageTooLarge)
	}
	return nil
}

// takeTurn waits for the connection's one sender slot (sendSem), which
// the caller gives back.
func (c *conn) takeTurn(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.closed:
		return c.closedErr()
	default:
	}
	select {
	case c.sendSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return c.closedErr()
	}
}

// sendInTurn sends msg, whose size was checked, in the caller's turn.
func (c *conn) sendInTurn(ctx context.Context, msg []byte) error {
	if err := c.takeMsgCredit(ctx); err != nil {
		return err
	}
	return c.sendFragments(ctx, msg)
}

func (c *conn) takeMsgCredit(ctx context.Context) error {
	for {
		c.mu.Lock()
		switch {
		case c.err != nil || c.closing:
			c.mu.Unlock()
			return c.closedErr()
		case c.msgCredits > 0:
			c.msgCredits--
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closed:
			return c.closedErr()
		}
	}
}

func (c *conn) sendFragments(ctx context.Context, msg []byte) error {
	var sds [maxChain]sendWR
	var bufs [maxChain]uint16
	off, first := 0, true
	for first || off < len(msg) {
		frags := max(1, (len(msg)-off+c.fragSize-1)/c.fragSize)
		n, h, err := c.takeSendBuffers(ctx, min(frags, maxChain), bufs[:])
		if err != nil {
			if ctx.Err() == nil {
				return err
			}
			if first { // nothing sent: the message credit is still ours
				c.mu.Lock()
				c.msgCredits++
				c.mu.Unlock()
				notify(c.wake)
				return err
			}
			c.fail(fmt.Errorf("rdma: send canceled mid-message: %w", transport.ErrClosed))
			return err
		}
		c.memMu.RLock()
		if c.freed {
			c.memMu.RUnlock()
			return c.closedErr()
		}
		for i := range n {
			k := min(len(msg)-off, c.fragSize)
			h.flags = 0
			if first {
				h.flags, h.total = flagFirst, uint32(len(msg))
			}
			if off+k == len(msg) {
				h.flags |= flagLast
			}
			b := c.sendBuf(int(bufs[i]))
			h.put(b)
			copy(b[headerSize:], msg[off:off+k])
			setSend(&sds[i], c.base+uint64(c.sendAt+int(bufs[i])*c.cfg.BufSize), headerSize+k, wrID(c.id, kindSend, 0, int(bufs[i])))
			off += k
			first = false
			h.retBuf, h.retCtl, h.retMsg = 0, 0, 0 // returned once, in the chain's first SEND
		}
		err = c.postSends(sds[:n], bufs[:n])
		c.memMu.RUnlock()
		if err != nil {
			c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
			return c.closedErr()
		}
	}
	return nil
}

// takeSendBuffers waits for at least one peer receive buffer and one free
// send buffer, takes up to want of each, and returns a data header carrying
// every credit owed to the peer.
func (c *conn) takeSendBuffers(ctx context.Context, want int, bufs []uint16) (int, header, error) {
	c.mu.Lock()
	for c.err == nil && (c.bufCredits == 0 || len(c.sendFree) == 0) {
		ownWork := len(c.sendFree) == 0 // freed by SEND completions, which raise no event
		c.mu.Unlock()
		if err := c.sleepUntilWake(ctx, ownWork); err != nil {
			return 0, header{}, err
		}
		c.mu.Lock()
	}
	if c.err != nil {
		c.mu.Unlock()
		return 0, header{}, c.closedErr()
	}
	n := min(want, c.bufCredits, len(c.sendFree))
	c.bufCredits -= n
	for i := range n {
		bufs[i] = c.sendFree[len(c.sendFree)-1-i]
	}
	c.sendFree = c.sendFree[:len(c.sendFree)-n]
	c.inflight += n
	h := c.takeOwed(msgData)
	c.mu.Unlock()
	return n, h, nil
}

// sleepUntilWake waits for c.wake; ownWork says that what it waits for is
// a completion of c's own SENDs, which raises no event by itself (poller.go,
// "Arming").
func (c *conn) sleepUntilWake(ctx context.Context, ownWork bool) error {
	if ownWork {
		c.sleepOnOwnWork()
		defer c.t.woke(c.cq)
	}
	select {
	case <-c.wake:
	case <-c.closed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// takeOwed moves every credit owed to the peer into a header (mu held).
func (c *conn) takeOwed(kind uint8) header {
	h := header{kind: kind, retBuf: uint16(c.owedBuf), retCtl: uint16(c.owedCtl), retMsg: uint16(c.owedMsg)}
	c.owedBuf, c.owedCtl, c.owedMsg = 0, 0, 0
	return h
}

// shouldReturn says whether owed credits are worth a message of their own
// (mu held): when a quarter of a pool is owed, or when the peer may be close
// to running out (then at once, however little is owed). Owed
// credit-message buffers alone never trigger one, or credit messages would
// beget credit messages; they ride on the next message.
func (c *conn) shouldReturn() bool {
	bufBatch := max(1, c.cfg.RecvBuffers/4)
	msgBatch := max(1, c.cfg.Credits/4)
	buf := c.owedBuf > 0 && (c.owedBuf >= bufBatch || c.held+c.owedBuf > c.cfg.RecvBuffers-bufBatch)
	msg := c.owedMsg > 0 && (c.owedMsg >= msgBatch || c.queued+c.assembling+c.owedMsg > c.cfg.Credits-msgBatch)
	return buf || msg
}

// returnCredits sends a credit-only message if one is due and the peer has a
// buffer reserved for it. If not, the credits wait: the peer's next message
// returns our credit-message buffers and calls this again.
func (c *conn) returnCredits() {
	c.mu.Lock()
	if c.err != nil || !c.shouldReturn() || c.ctlCredits == 0 || len(c.ctlFree) == 0 {
		// Out of credit-message buffers: they come back with the
		// completions of our SENDs, which raise no event by themselves
		// (poller.go, "Arming"). This may run inside a drain of the CQ,
		// so ask for the event without reaping.
		starved := c.err == nil && c.ctlCredits > 0 && len(c.ctlFree) == 0 && c.shouldReturn()
		c.mu.Unlock()
		if starved {
			_ = c.t.armNext(c.cq, false) // a failed CQ fails its queue pairs too
		}
		return
	}
	c.ctlCredits--
	i := c.ctlFree[len(c.ctlFree)-1]
	c.ctlFree = c.ctlFree[:len(c.ctlFree)-1]
	c.inflight++
	h := c.takeOwed(msgCtl)
	c.mu.Unlock()

	c.memMu.RLock()
	defer c.memMu.RUnlock()
	if c.freed {
		return
	}
	h.put(c.ctlBuf(int(i)))
	var sd [1]sendWR
	setSend(&sd[0], c.base+uint64(c.ctlAt+int(i)*64), headerSize, wrID(c.id, kindCtl, 0, int(i)))
	ent := [1]uint16{i | sqCtl}
	if err := c.postSends(sd[:], ent[:]); err != nil {
		c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
	}
}

// postSends posts a chain of SENDs of buffers ents (sqCtl marking
// credit-message buffers), memMu read-held. It decides which are signalled
// (sendQueue.add: all of them until the connection is handed out, so that
// Close's linger needs no fence while the peer may still refuse READs) and
// which go inline.
func (c *conn) postSends(sds []sendWR, ents []uint16) error {
	return c.postSendsKey(c.lkey, sds, ents)
}

// postSendsKey is postSends with the buffers' memory key given (tests give
// a wrong one, which an inline SEND does not use).
func (c *conn) postSendsKey(lkey uint32, sds []sendWR, ents []uint16) error {
	c.sqMu.Lock()
	defer c.sqMu.Unlock()
	always := !c.ready.Load()
	inlined := 0
	for i := range sds {
		f := 0
		if c.sq.add(ents[i], always) {
			f |= sendSignaled
		}
		if sendLen(&sds[i]) <= c.maxInline {
			f |= sendInline
			inlined++
		}
		setSendFlags(&sds[i], f)
	}
	if inlined > 0 {
		c.inlined.Add(uint64(inlined))
	}
	return c.qp.postSends(lkey, sds)
}

// retire frees the buffers of every SEND up to and including the signalled
// one of entry e that completed (poller).
func (c *conn) retire(e uint16) {
	c.signalled.Add(1)
	c.sqMu.Lock()
	ok := c.sq.retireThrough(e, c.freeEntry)
	c.sqMu.Unlock()
	if !ok {
		c.fail(fmt.Errorf("rdma: completion for SEND buffer %#x, which is not posted: %w", e, transport.ErrClosed))
	}
}

// retireFence frees the buffers of every SEND posted before a fence (a
// keepalive READ, or Close's) that completed; pos is its position (poller).
func (c *conn) retireFence(pos *uint64) {
	c.sqMu.Lock()
	c.sq.retireBefore(*pos, c.freeEntry)
	c.sqMu.Unlock()
}

// freeEntry hands a retired buffer back, through afterBatch (poller).
func (c *conn) freeEntry(e uint16) {
	if e&sqCtl != 0 {
		c.freedCtl = append(c.freedCtl, e&^sqCtl)
	} else {
		c.freedSend = append(c.freedSend, e)
	}
}

// fence posts a signalled zero-length READ after every SEND posted so far,
// so that unsignalled ones are retired without waiting for a later SEND:
// Close's linger ends once it completes. Only on a connection that has
// been handed out (the peer grants READ), once.
func (c *conn) fence() {
	c.memMu.RLock()
	defer c.memMu.RUnlock()
	if c.freed || !c.ready.Load() {
		return
	}
	c.sqMu.Lock()
	defer c.sqMu.Unlock()
	if c.fenced || c.sq.pending() == 0 {
		return
	}
	c.fenced = true
	c.fencePos = c.sq.fence()
	if err := c.qp.postKeepAlive(wrID(c.id, kindFence, 0, 0)); err != nil {
		c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
	}
}
