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

// maxPipeline bounds the READ slots one Read call keeps in flight at once
// when its batch is larger than a slot (a large value): it takes the extra
// slots only if they are free, so small Reads are never kept waiting for
// them.
const maxPipeline = 4

// round is one chain of READs planned into a slot.
type round struct {
	idx    int // the slot
	seq    uint8
	n      int // READs in the chain
	pieces [transport.MaxBatch]piece
	rds    [transport.MaxBatch]readWR
}

// planner cuts a batch into rounds of at most one slot's bytes and
// MaxBatch READs.
type planner struct {
	ops      []transport.ReadOp
	op, done int // next op, and bytes of it already planned
}

func (p *planner) more() bool { return p.op < len(p.ops) }

// next fills r with the next round for slot s of staging st.
func (p *planner) next(r *round, st *staging, s *readSlot, slotSize int) {
	n, used := 0, 0
	for p.op < len(p.ops) && n < len(r.rds) && used < slotSize {
		o := &p.ops[p.op]
		k := min(len(o.Dst)-p.done, slotSize-used)
		if k > 0 {
			setRead(&r.rds[n], o.Remote.Addr+o.Offset+uint64(p.done), st.base+uint64(s.off+used), k, o.Remote.Key)
			r.pieces[n] = piece{op: p.op, dstOff: p.done, slotOff: used, n: k}
			n, used, p.done = n+1, used+k, p.done+k
		}
		if p.done == len(o.Dst) {
			p.op, p.done = p.op+1, 0
		}
	}
	r.n = n
}

// Read posts the batch as one chain of READs (one doorbell, only the last
// signalled) into a staging slot, waits for its completion, and copies the
// bytes into each Dst. A batch larger than a slot goes in several rounds,
// up to maxPipeline of them in flight in as many slots (those free when
// it starts), copied out in order while the next are on the wire.
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
	var rounds [maxPipeline]round
	nslots := 1
	rounds[0].idx = idx
	if want := (total + c.cfg.ReadSlotSize - 1) / c.cfg.ReadSlotSize; want > 1 {
		nslots += c.takeFreeSlots(rounds[1:min(want, maxPipeline)])
	}
	plan := planner{ops: ops}
	// Rounds go to the slots in turn: head is the oldest in flight, and
	// posted counts those in flight.
	head, posted := 0, 0
	for {
		for posted < nslots && plan.more() {
			r := &rounds[(head+posted)%nslots]
			plan.next(r, st, &c.slots[r.idx], c.cfg.ReadSlotSize)
			if r.n == 0 {
				break
			}
			if err := c.postRound(ctx, r); err != nil {
				c.abandonRounds(rounds[:nslots], head, posted, -1)
				return err
			}
			posted++
		}
		c.pipelineDepth(posted)
		if posted == 0 {
			break
		}
		r := &rounds[head]
		if err := c.waitRound(ctx, r); err != nil {
			c.abandonRounds(rounds[:nslots], (head+1)%nslots, posted-1, r.idx)
			return err // r's slot is released or left to the poller
		}
		if err := c.copyOut(st, &c.slots[r.idx], ops, r.pieces[:r.n]); err != nil {
			c.abandonRounds(rounds[:nslots], (head+1)%nslots, posted-1, -1)
			return err
		}
		head, posted = (head+1)%nslots, posted-1
	}
	for i := range nslots {
		c.releaseSlot(rounds[i].idx)
	}
	return nil
}

// pipelineDepth records the most rounds one Read had in flight (tests).
func (c *conn) pipelineDepth(n int) {
	if int32(n) > c.maxReadDepth.Load() {
		c.maxReadDepth.Store(int32(n))
	}
}

// takeFreeSlots takes as many READ slots for rs as are free now, without
// waiting, and reports how many.
func (c *conn) takeFreeSlots(rs []round) int {
	for i := range rs {
		select {
		case rs[i].idx = <-c.freeSlots:
		default:
			return i
		}
	}
	return len(rs)
}

// postRound posts r's chain. On error the connection has failed.
func (c *conn) postRound(ctx context.Context, r *round) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := &c.slots[r.idx]
	r.seq = uint8(s.word.Load()>>8) + 1
	s.word.Store(slotWord(r.seq, slotPosted))
	c.memMu.RLock()
	if c.freed {
		c.memMu.RUnlock()
		s.word.Store(slotWord(r.seq, slotIdle))
		return c.closedErr()
	}
	err := c.qp.postReads(c.stage.lkey, r.rds[:r.n], wrID(c.id, kindRead, r.seq, r.idx))
	c.memMu.RUnlock()
	if err != nil {
		s.word.Store(slotWord(r.seq, slotIdle))
		c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
		return c.closedErr()
	}
	return nil
}

// waitRound waits for r's completion. On error r's slot has been released
// (or, if the device may still write into it, left for the poller to
// release when the completion arrives).
func (c *conn) waitRound(ctx context.Context, r *round) error {
	s := &c.slots[r.idx]
	if !c.spinWait(func() bool { return len(s.done) > 0 }) {
		c.sleepOnOwnWork() // a READ's completion raises no event by itself
		defer c.t.woke(c.cq)
	}
	// The completion is usually here by now (on Soft-RoCE the device's
	// work runs inside the posting call): take it without touching
	// ctx.Done(), which may have to arm a timer (a context that makes its
	// deadline's timer only when waited on, as the client's GETs do) and
	// makes a select of three channels.
	select {
	case <-s.done:
		return c.roundResult(r.idx)
	default:
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		if s.word.CompareAndSwap(slotWord(r.seq, slotPosted), slotWord(r.seq, slotAbandoned)) {
			return ctx.Err()
		}
		<-s.done
	case <-c.closed:
		if s.word.CompareAndSwap(slotWord(r.seq, slotPosted), slotWord(r.seq, slotAbandoned)) {
			return c.closedErr()
		}
		<-s.done
	}
	return c.roundResult(r.idx)
}

// roundResult is the outcome of slot idx's completed round; on error the
// slot is released.
func (c *conn) roundResult(idx int) error {
	if err := c.slots[idx].err; err != nil {
		c.releaseSlot(idx)
		return err
	}
	return nil
}

// abandonRounds gives back a failed Read's slots: the posted rounds
// starting at head are abandoned to the poller (or released if already
// complete), and every other slot is released, except skip (a slot the
// failure already dealt with; -1 for none).
func (c *conn) abandonRounds(rs []round, head, posted, skip int) {
	inFlight := make(map[int]bool, posted)
	for i := range posted {
		r := &rs[(head+i)%len(rs)]
		inFlight[r.idx] = true
		s := &c.slots[r.idx]
		if s.word.CompareAndSwap(slotWord(r.seq, slotPosted), slotWord(r.seq, slotAbandoned)) {
			continue // the poller frees it
		}
		<-s.done // completed: collect it, then free it
		c.releaseSlot(r.idx)
	}
	for i := range rs {
		if idx := rs[i].idx; idx != skip && !inFlight[idx] {
			c.releaseSlot(idx)
		}
	}
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
	select { // a free slot without touching ctx.Done() (see waitRound)
	case idx := <-c.freeSlots:
		return st, idx, nil
	default:
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
