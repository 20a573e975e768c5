//go:build rdma

package rdma

// #include "shim.h"
import "C"

import (
	"context"
	"fmt"

	"github.com/kvd-project/kvd/transport"
)

// writeProbe posts one RDMA WRITE of n bytes (n at most ReadSlotSize) from
// a read slot into the peer's region d at offset 0, and waits for it. The
// transport never writes remotely; only tests call this, to prove that the
// peer refuses remote writes (its regions are registered for remote READ
// only, and its queue pairs grant READ only). A refused WRITE fails like a
// refused READ (ErrBadKey, and the connection is lost).
func (c *conn) writeProbe(ctx context.Context, d transport.Descriptor, n int) error {
	if n <= 0 || n > c.cfg.ReadSlotSize || uint64(n) > d.Len {
		return fmt.Errorf("rdma: write probe of %d bytes: %w", n, transport.ErrOutOfRange)
	}
	var idx int
	select {
	case idx = <-c.freeSlots:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return c.closedErr()
	}
	s := &c.slots[idx]
	seq := uint8(s.word.Load()>>8) + 1
	s.word.Store(slotWord(seq, slotPosted))
	c.memMu.RLock()
	if c.freed {
		c.memMu.RUnlock()
		return c.closedErr()
	}
	rc := C.kvd_post_write(c.qp.q, C.uint32_t(c.lkey), C.uint64_t(c.base+uint64(s.off)), C.uint64_t(d.Addr),
		C.uint32_t(d.Key), C.uint32_t(n), C.uint64_t(wrID(c.id, kindRead, seq, idx)))
	c.memMu.RUnlock()
	if rc != 0 {
		c.releaseSlot(idx)
		return fmt.Errorf("rdma: post WRITE: errno %d", int(rc))
	}
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
	err := s.err
	c.releaseSlot(idx)
	return err
}
