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
	if len(msg) > c.maxMsg {
		return fmt.Errorf("rdma: send of %d bytes (max %d): %w", len(msg), c.maxMsg, transport.ErrMessageTooLarge)
	}
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
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return c.closedErr()
	}
	defer func() { <-c.sendSem }()
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
		err = c.qp.postSends(c.lkey, sds[:n])
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
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-c.closed:
		case <-ctx.Done():
			return 0, header{}, ctx.Err()
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
		c.mu.Unlock()
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
	if err := c.qp.postSends(c.lkey, sd[:]); err != nil {
		c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
	}
}
