package tcp

import (
	"context"
	"fmt"
	"sync"

	"github.com/kvd-project/kvd/transport"
)

// slotState is where a READ batch posted by this end is in its life.
type slotState uint8

const (
	slotIdle      slotState = iota
	slotPosted              // request sent; readLoop may fill dst
	slotAbandoned           // Read gave up; readLoop drains the response and frees the slot
	slotDone                // response in; Read collects it
)

// slot is one READ batch in flight. Its index is the request id on the wire.
// Slots are allocated once per connection so that Read allocates nothing.
type slot struct {
	id   uint32
	done chan struct{} // readLoop signals slotDone

	mu    sync.Mutex // guards state, and every write into dst by readLoop
	state slotState

	// Set by Read before posting, read-only while posted.
	n     int
	dst   [transport.MaxBatch][]byte
	total uint64
	req   [headerSize + opSize*transport.MaxBatch]byte

	// Set by readLoop before signalling done.
	status status
	bad    uint8
}

// readSlots are the READ batches this end can have in flight.
type readSlots struct {
	all  []slot
	free chan *slot
}

// init allocates n slots and makes the first usable of them available:
// usable is also bounded by what the peer serves at once.
func (r *readSlots) init(n, usable int) {
	r.all = make([]slot, n)
	r.free = make(chan *slot, n)
	for i := range r.all {
		s := &r.all[i]
		s.id = uint32(i)
		s.done = make(chan struct{}, 1)
		if i < usable {
			r.free <- s
		}
	}
}

// Read posts ops as one READ_REQ frame and waits for the READ_RESP.
func (c *conn) Read(ctx context.Context, ops []transport.ReadOp) error {
	if err := c.checkOps(ops); err != nil {
		return err
	}
	if err := c.usable(ctx); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	if c.cut() {
		return fmt.Errorf("tcp: read from %s: %w", c.remote, ErrPartitioned)
	}
	var s *slot
	select {
	case s = <-c.reads.free:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return c.err
	}
	n := s.post(ops)
	c.wlock()
	_, err := c.bw.Write(s.req[:n])
	if err = c.wunlock(err); err != nil {
		s.abandon()
		return err
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		if s.abandon() {
			return ctx.Err()
		}
		<-s.done // completed as ctx ended: take the result
	case <-c.closed:
		if s.abandon() {
			return c.err
		}
		<-s.done
	}
	st, bad := s.status, int(s.bad)
	s.release(c)
	if st != statusOK {
		return c.readErr(ops, st, bad)
	}
	return nil
}

func (c *conn) checkOps(ops []transport.ReadOp) error {
	if len(ops) > transport.MaxBatch {
		return fmt.Errorf("tcp: %d reads in one batch, max %d: %w", len(ops), transport.MaxBatch, transport.ErrBatchTooLarge)
	}
	for i := range ops {
		if uint64(len(ops[i].Dst)) > maxReadLen {
			return fmt.Errorf("tcp: read op %d: length %d exceeds the per-op max of %d: %w",
				i, len(ops[i].Dst), uint64(maxReadLen), transport.ErrOutOfRange)
		}
	}
	return nil
}

// post records ops in the slot, marks it posted and encodes the request;
// it returns the request's length.
func (s *slot) post(ops []transport.ReadOp) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n, s.total = len(ops), 0
	for i := range ops {
		op := &ops[i]
		s.dst[i] = op.Dst
		s.total += uint64(len(op.Dst))
		wireOp{addr: op.Remote.Addr + op.Offset, n: uint32(len(op.Dst)), key: op.Remote.Key}.
			put(s.req[headerSize+i*opSize:])
	}
	header{typ: frameReadReq, a: uint8(len(ops)), id: s.id, length: uint64(len(ops) * opSize)}.put(s.req[:])
	s.state = slotPosted
	return headerSize + len(ops)*opSize
}

// abandon stops readLoop from touching the slot's dst. It reports false if
// the response already completed, in which case done is (or will be)
// signalled and the caller must collect it.
func (s *slot) abandon() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == slotDone {
		return false
	}
	s.state = slotAbandoned
	return true
}

func (c *conn) readErr(ops []transport.ReadOp, st status, bad int) error {
	op := ops[bad]
	switch st {
	case statusBadKey:
		return fmt.Errorf("tcp: read op %d of %v from %s: %w", bad, op.Remote, c.remote, transport.ErrBadKey)
	case statusOutOfRange:
		return fmt.Errorf("tcp: read op %d: offset %d + length %d outside %v at %s: %w",
			bad, op.Offset, len(op.Dst), op.Remote, c.remote, transport.ErrOutOfRange)
	case statusPartitioned:
		return fmt.Errorf("tcp: read from %s refused: %w", c.remote, ErrPartitioned)
	}
	return fmt.Errorf("tcp: read op %d: status %d: %w", bad, st, transport.ErrProtocol)
}

// onReadResp completes a posted READ batch from a READ_RESP; readLoop calls
// it. Data goes straight from the read buffer into the caller's Dst, a
// buffer-full at a time under the slot's lock, so that an abandoning Read
// waits at most for one memory copy and nothing lands in Dst after it.
func (c *conn) onReadResp(h header) error {
	if h.id >= uint32(len(c.reads.all)) {
		return protoErr("READ_RESP for request %d, which was never posted", h.id)
	}
	s := &c.reads.all[h.id]
	s.mu.Lock()
	inFlight := s.state == slotPosted || s.state == slotAbandoned
	s.mu.Unlock()
	switch {
	case !inFlight:
		return protoErr("READ_RESP for request %d, which is not in flight", h.id)
	case status(h.a) != statusOK:
		if int(h.b) >= s.n {
			return protoErr("READ_RESP: failed op %d of a %d-op batch", h.b, s.n)
		}
		s.complete(c, status(h.a), h.b)
		return nil
	case h.length != s.total+trailerSize:
		return protoErr("READ_RESP of %d bytes for reads of %d", h.length, s.total)
	}
	for i := range s.n {
		if err := c.fill(s, s.dst[i]); err != nil {
			return err
		}
	}
	var tr [trailerSize]byte
	if err := c.fill(nil, tr[:]); err != nil {
		return err
	}
	st := status(tr[0])
	if (st != statusOK && st != statusBadKey) || int(tr[1]) >= s.n || (st == statusOK && tr[1] != 0) {
		return protoErr("READ_RESP trailer (%d, %d) for a %d-op batch", tr[0], tr[1], s.n)
	}
	s.complete(c, st, tr[1])
	return nil
}

// fill copies len(dst) bytes from the socket into dst, or drops them if s
// has been abandoned. s is nil for readLoop's own buffers.
func (c *conn) fill(s *slot, dst []byte) error {
	for len(dst) > 0 {
		if c.br.Buffered() == 0 {
			if _, err := c.br.Peek(1); err != nil { // wait for data, lock not held
				return err
			}
		}
		p, _ := c.br.Peek(min(c.br.Buffered(), len(dst)))
		if s == nil {
			copy(dst, p)
		} else {
			s.mu.Lock()
			if s.state == slotPosted {
				copy(dst, p)
			}
			s.mu.Unlock()
		}
		c.br.Discard(len(p))
		dst = dst[len(p):]
	}
	return nil
}

// complete hands the outcome to the waiting Read, or frees an abandoned
// slot.
func (s *slot) complete(c *conn, st status, bad uint8) {
	s.mu.Lock()
	if s.state == slotAbandoned {
		s.mu.Unlock()
		s.release(c)
		return
	}
	s.status, s.bad, s.state = st, bad, slotDone
	s.mu.Unlock()
	s.done <- struct{}{}
}

// release returns a finished slot to the free list, dropping its references
// to the caller's buffers.
func (s *slot) release(c *conn) {
	s.mu.Lock()
	clear(s.dst[:s.n])
	s.state = slotIdle
	s.mu.Unlock()
	c.reads.free <- s
}
