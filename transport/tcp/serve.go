package tcp

import (
	"fmt"
	"io"

	"github.com/kvd-project/kvd/transport"
)

// job is one READ batch the peer asked this end to serve.
type job struct {
	id  uint32
	n   int
	ops [transport.MaxBatch]wireOp
}

// serveQueue holds the READ batches the peer has in flight here: at most
// as many as this end announced in its hello. Jobs are made as the peer's
// batches need them (readLoop alone makes them) and then reused.
type serveQueue struct {
	free  chan *job
	ready chan *job
	made  int // readLoop's
}

func (q *serveQueue) init(n int) {
	q.free = make(chan *job, n)
	q.ready = make(chan *job, n)
}

// onReadReq queues a READ_REQ for serveLoop; readLoop calls it. Serving is
// left to another goroutine so that readLoop never waits on the socket's
// send side: two ends reading each other could otherwise deadlock.
func (c *conn) onReadReq(h header) error {
	var j *job
	select {
	case j = <-c.serve.free:
	default:
		if c.serve.made == cap(c.serve.free) {
			return protoErr("peer has more than the %d READ batches it was allowed in flight", cap(c.serve.free))
		}
		j = new(job)
		c.serve.made++
	}
	b := c.rreq[:h.length]
	if _, err := io.ReadFull(c.br, b); err != nil {
		return err
	}
	j.id, j.n = h.id, int(h.a)
	total := uint64(0)
	for i := range j.n {
		j.ops[i] = parseOp(b[i*opSize:])
		total += uint64(j.ops[i].n)
	}
	if total > transport.MaxReadBatchBytes {
		c.serve.free <- j
		return fmt.Errorf("tcp: READ_REQ for %d bytes, max %d (transport.MaxReadBatchBytes): %w: %w",
			total, transport.MaxReadBatchBytes, errReadTooLarge, transport.ErrProtocol)
	}
	c.serve.ready <- j
	return nil
}

// serveLoop answers READ batches in the order they arrived, returns
// message credits when Recv asks, and flushes the READ requests Reads
// posted.
func (c *conn) serveLoop() {
	defer c.loops.Done()
	for {
		var err error
		select {
		case j := <-c.serve.ready:
			// With more batches queued, the next serveOne flushes this
			// one's response with its own: under load, one socket write
			// (and one wakeup of the peer) answers many READ batches.
			err = c.serveOne(j, len(c.serve.ready) > 0)
		case <-c.msgs.kick:
			err = c.returnCredits()
		case <-c.flushKick:
			err = c.flushPosted()
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// serveOne checks a batch and writes its READ_RESP: the bytes of every op,
// copied out of the registered memory with no application involvement, then
// a trailer that reports a region closed while it was being copied. With
// more, it leaves the response in the write buffer for the next writer to
// flush.
func (c *conn) serveOne(j *job, more bool) error {
	var regs [transport.MaxBatch]*region
	var offs [transport.MaxBatch]uint64
	st, bad, total := statusOK, 0, uint64(0)
	if c.cut() {
		st = statusPartitioned
	}
	for i := 0; i < j.n && st == statusOK; i++ {
		regs[i], offs[i], st = c.t.regions.resolve(j.ops[i])
		bad = i
		total += uint64(j.ops[i].n)
	}
	c.wlock()
	if st != statusOK {
		err := c.writeHeader(header{typ: frameReadResp, a: uint8(st), b: uint8(bad), id: j.id})
		c.serve.free <- j
		return c.wunlockMore(err, more)
	}
	err := c.writeHeader(header{typ: frameReadResp, id: j.id, length: total + trailerSize})
	tst, tbad := statusOK, 0
	for i := 0; i < j.n && err == nil; i++ {
		var ok bool
		ok, err = c.copyOut(regs[i], offs[i], uint64(j.ops[i].n), tst == statusOK)
		if !ok && tst == statusOK {
			tst, tbad = statusBadKey, i
		}
	}
	if err == nil {
		c.whdr[0], c.whdr[1] = byte(tst), byte(tbad)
		_, err = c.bw.Write(c.whdr[:trailerSize])
	}
	// Free the job before the flush: the peer may post its next batch as
	// soon as it has this response.
	c.serve.free <- j
	return c.wunlockMore(err, more)
}

// copyOut writes n bytes of r from off into the write buffer, a buffer-full
// at a time so that the region is locked only for memory copies, never
// across a socket write. If the region is (or gets) closed, or want is
// false, zeros stand in for the rest and ok is false. The caller holds the
// writer.
func (c *conn) copyOut(r *region, off, n uint64, want bool) (ok bool, err error) {
	ok = want
	for n > 0 {
		if c.bw.Available() == 0 {
			if err := c.bw.Flush(); err != nil {
				return ok, err
			}
		}
		buf := c.bw.AvailableBuffer()
		k := min(uint64(cap(buf)), n)
		buf = buf[:k]
		if !ok || !r.copyTo(buf, off) {
			ok = false
			clear(buf)
		}
		if _, err := c.bw.Write(buf); err != nil {
			return ok, err
		}
		off, n = off+k, n-k
	}
	return ok, nil
}
