//go:build rdma

package rdma

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/kvd-project/kvd/transport"
)

// A read slot is the part of a connection's READ staging (staging.go) that
// one Read call at a time READs into. Its word packs a sequence byte and a
// state, so a completion for an earlier use of the slot is recognised and
// ignored.
type readSlot struct {
	word atomic.Uint32 // seq<<8 | state
	off  int           // offset in the connection's mapping
	err  error         // completion result; written by the poller before done
	done chan struct{}
}

const (
	slotIdle = iota
	slotPosted
	slotCompleted
	slotAbandoned // the reader left (ctx, close); the poller frees the slot
)

func slotWord(seq uint8, state uint32) uint32 { return uint32(seq)<<8 | state }

// piece maps part of a staging slot back to an op's Dst.
type piece struct {
	op, dstOff, slotOff, n int
}

// Read posts the batch as one chain of READs (one doorbell, only the last
// signalled) into a staging slot, waits for its completion, and copies the
// bytes into each Dst. Batches larger than a slot go in several rounds.
func (c *conn) Read(ctx context.Context, ops []transport.ReadOp) error {
	if len(ops) > transport.MaxBatch {
		return fmt.Errorf("rdma: %d reads in one batch (max %d): %w", len(ops), transport.MaxBatch, transport.ErrBatchTooLarge)
	}
	total := 0
	for i := range ops {
		op := &ops[i]
		if n := uint64(len(op.Dst)); op.Offset > op.Remote.Len || n > op.Remote.Len-op.Offset {
			return fmt.Errorf("rdma: read [%d, +%d) of %v: %w", op.Offset, n, op.Remote, transport.ErrOutOfRange)
		}
		total += len(op.Dst)
	}
	if total > transport.MaxReadBatchBytes {
		return fmt.Errorf("rdma: %d bytes in one READ batch (max %d): %w", total, transport.MaxReadBatchBytes, transport.ErrBatchTooLarge)
	}
	// An ended context or a closed connection fails the Read before
	// anything is posted (select below would pick among ready cases at
	// random).
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.closed:
		return c.closedErr()
	default:
	}
	st, idx, err := c.takeSlot(ctx)
	if err != nil {
		return err
	}
	s := &c.slots[idx]
	var pieces [transport.MaxBatch]piece
	var rds [transport.MaxBatch]readWR
	op, done := 0, 0 // next op, and bytes of it already planned
	for op < len(ops) {
		n, used := 0, 0
		for op < len(ops) && n < len(rds) && used < c.cfg.ReadSlotSize {
			o := &ops[op]
			k := min(len(o.Dst)-done, c.cfg.ReadSlotSize-used)
			if k > 0 {
				setRead(&rds[n], o.Remote.Addr+o.Offset+uint64(done), st.base+uint64(s.off+used), k, o.Remote.Key)
				pieces[n] = piece{op: op, dstOff: done, slotOff: used, n: k}
				n, used, done = n+1, used+k, done+k
			}
			if done == len(o.Dst) {
				op, done = op+1, 0
			}
		}
		if n == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			c.releaseSlot(idx)
			return err
		}
		if err := c.readRound(ctx, idx, st.lkey, rds[:n]); err != nil {
			return err // the slot is released or left to the poller
		}
		if err := c.copyOut(st, s, ops, pieces[:n]); err != nil {
			return err
		}
	}
	c.releaseSlot(idx)
	return nil
}

// readRound posts one chain and waits for it. On error the slot has been
// released (or, if the device may still write into it, left for the poller
// to release when the completion arrives).
func (c *conn) readRound(ctx context.Context, idx int, lkey uint32, rds []readWR) error {
	s := &c.slots[idx]
	seq := uint8(s.word.Load()>>8) + 1
	s.word.Store(slotWord(seq, slotPosted))
	c.memMu.RLock()
	if c.freed {
		c.memMu.RUnlock()
		return c.closedErr()
	}
	err := c.qp.postReads(lkey, rds, wrID(c.id, kindRead, seq, idx))
	c.memMu.RUnlock()
	if err != nil {
		c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
		return c.closedErr()
	}
	c.spinWait(func() bool { return len(s.done) > 0 })
	select {
	case <-s.done:
	case <-ctx.Done():
		if s.word.CompareAndSwap(slotWord(seq, slotPosted), slotWord(seq, slotAbandoned)) {
			return ctx.Err()
		}
		<-s.done
	case <-c.closed:
		if s.word.CompareAndSwap(slotWord(seq, slotPosted), slotWord(seq, slotAbandoned)) {
			return c.closedErr()
		}
		<-s.done
	}
	if s.err != nil {
		c.releaseSlot(idx)
		return s.err
	}
	return nil
}

func (c *conn) copyOut(st *staging, s *readSlot, ops []transport.ReadOp, pieces []piece) error {
	c.memMu.RLock()
	defer c.memMu.RUnlock()
	if c.freed {
		return c.closedErr()
	}
	for _, p := range pieces {
		at := s.off + p.slotOff
		copy(ops[p.op].Dst[p.dstOff:p.dstOff+p.n], st.mem[at:at+p.n])
	}
	return nil
}

// takeSlot waits for a free READ slot, setting up the connection's READ
// staging first if it has none yet.
func (c *conn) takeSlot(ctx context.Context) (*staging, int, error) {
	st, err := c.staging()
	if err != nil {
		return nil, 0, err
	}
	select {
	case idx := <-c.freeSlots:
		return st, idx, nil
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	case <-c.closed:
		return nil, 0, c.closedErr()
	}
}

func (c *conn) releaseSlot(idx int) {
	s := &c.slots[idx]
	s.word.Store(slotWord(uint8(s.word.Load()>>8), slotIdle))
	c.freeSlots <- idx
}

// readDone records the completion of slot idx's round seq (poller). After
// an error every later work request completes too (flushed); only the first
// completion of a round counts.
func (c *conn) readDone(idx int, seq uint8, err error) {
	s := &c.slots[idx]
	w := s.word.Load()
	if uint8(w>>8) != seq {
		return
	}
	if w&0xff == slotPosted {
		s.err = err
		if s.word.CompareAndSwap(w, slotWord(seq, slotCompleted)) {
			s.done <- struct{}{}
			return
		}
	}
	if s.word.CompareAndSwap(slotWord(seq, slotAbandoned), slotWord(seq, slotIdle)) {
		c.freeSlots <- idx
	}
}
