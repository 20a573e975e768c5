package tcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

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

// readSlots are the READ batches this end can have in flight: as many as
// both ends allow. Slots are made as Reads need them (a connection that
// never posts a READ, such as a server's, has none) and then reused.
type readSlots struct {
	all  []atomic.Pointer[slot] // by id; nil until made
	free chan *slot
	mu   sync.Mutex // guards made
	made int
}

func (r *readSlots) init(usable int) {
	r.all = make([]atomic.Pointer[slot], usable)
	r.free = make(chan *slot, usable)
}

// get returns a free slot, making one if none is free and fewer than the
// limit exist, or waits for one.
func (r *readSlots) get(ctx context.Context, closed <-chan struct{}) (*slot, error) {
	select {
	case s := <-r.free:
		return s, nil
	default:
	}
	r.mu.Lock()
	if r.made < len(r.all) {
		s := &slot{id: uint32(r.made), done: make(chan struct{}, 1)}
		r.all[r.made].Store(s)
		r.made++
		r.mu.Unlock()
		return s, nil
	}
	r.mu.Unlock()
	select {
	case s := <-r.free:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-closed:
		return nil, errClosedConn
	}
}

// errClosedConn stands for the connection's own error (c.err) in get.
var errClosedConn = errors.New("closed")

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
	s, err := c.reads.get(ctx, c.closed)
	if err != nil {
		return c.usable(ctx) // closed (errClosedConn), or ctx is done
	}
	n := s.post(ops)
	alone := c.inflight.Add(1) == 1
	defer c.inflight.Add(-1)
	c.wlock()
	_, err = c.bw.Write(s.req[:n])
	if err = c.wunlockPosted(err, alone); err != nil {
		s.abandon()
		return err
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		if s.abandon() {
			return c.usable(ctx)
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
	total := 0
	for i := range ops {
		if uint64(len(ops[i].Dst)) > maxReadLen {
			return fmt.Errorf("tcp: read op %d: length %d exceeds the per-op max of %d: %w",
				i, len(ops[i].Dst), uint64(maxReadLen), transport.ErrOutOfRange)
		}
		total += len(ops[i].Dst)
	}
	if total > transport.MaxReadBatchBytes {
		return fmt.Errorf("tcp: reads of %d bytes in one batch, max %d: %w",
			total, transport.MaxReadBatchBytes, transport.ErrBatchTooLarge)
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
	var s *slot
	if h.id < uint32(len(c.reads.all)) {
		s = c.reads.all[h.id].Load()
	}
	if s == nil {
		return protoErr("READ_RESP for request %d, which was never posted", h.id)
	}
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
	var buf []byte
	if s.total >= readBufSize {
		sb := scratch.Get().(*[bufSize]byte)
		defer scratch.Put(sb)
		buf = sb[:]
	}
	for i := range s.n {
		if err := c.fill(s, s.dst[i], buf); err != nil {
			return err
		}
	}
	var tr [trailerSize]byte
	if err := c.fill(nil, tr[:], nil); err != nil {
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
// has been abandoned. s is nil for readLoop's own buffers. Bytes come through
// the read buffer, or, when it is empty and scratch (a buffer larger than it)
// is given, straight from the socket into scratch: large responses then
// take as few socket reads as with a large read buffer.
func (c *conn) fill(s *slot, dst, scratch []byte) error {
	for len(dst) > 0 {
		var p []byte
		var rerr error
		buffered := c.br.Buffered() > 0
		switch {
		case buffered:
			p, _ = c.br.Peek(min(c.br.Buffered(), len(dst)))
		case scratch != nil && len(dst) >= readBufSize:
			// The buffer is empty and scratch larger than it: bufio reads
			// the socket straight into scratch (lock not held).
			var k int
			k, rerr = c.br.Read(scratch[:min(len(scratch), len(dst))])
			if k == 0 {
				if rerr == nil {
					continue
				}
				return rerr
			}
			p = scratch[:k]
		default:
			if _, err := c.br.Peek(1); err != nil { // wait for data, lock not held
				return err
			}
			continue
		}
		if s == nil {
			copy(dst, p)
		} else {
			s.mu.Lock()
			if s.state == slotPosted {
				copy(dst, p)
			}
			s.mu.Unlock()
		}
		if buffered {
			c.br.Discard(len(p))
		}
		dst = dst[len(p):]
		if rerr != nil && len(dst) > 0 {
			return rerr
		}
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
