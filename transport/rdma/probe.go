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
	st, idx, err := c.takeSlot(ctx)
	if err != nil {
		return err
	}
	s := &c.slots[idx]
	seq := uint8(s.word.Load()>>8) + 1
	s.word.Store(slotWord(seq, slotPosted))
	c.memMu.RLock()
	if c.freed {
		c.memMu.RUnlock()
		return c.closedErr()
	}
	rc := C.kvd_post_write(c.qp.q, C.uint32_t(st.lkey), C.uint64_t(st.base+uint64(s.off)), C.uint64_t(d.Addr),
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
	err = s.err
	c.releaseSlot(idx)
	return err
}

// qpInfo is what tests check of a queue pair's attributes.
type qpInfo struct {
	state, timeout, retryCnt, rnrRetry, trafficClass int
	maxRdAtomic, maxDestRdAtomic, maxInline, access  int
}

// qpInfo queries the connection's queue pair (tests).
func (c *conn) qpInfo() (qpInfo, error) {
	c.memMu.RLock()
	defer c.memMu.RUnlock()
	if c.freed {
		return qpInfo{}, c.closedErr()
	}
	var q C.struct_kvd_qp_info
	if rc := C.kvd_query_qp(c.qp.q, &q); rc != 0 {
		return qpInfo{}, fmt.Errorf("rdma: ibv_query_qp: errno %d", -int(rc))
	}
	return qpInfo{int(q.state), int(q.timeout), int(q.retry_cnt), int(q.rnr_retry), int(q.traffic_class),
		int(q.max_rd_atomic), int(q.max_dest_rd_atomic), int(q.max_inline_data), int(q.access)}, nil
}

// silence makes the connection's queue pair drop everything and answer
// nothing, without telling the connection manager: to its peer it is a
// dead host (tests).
func (c *conn) silence() error {
	c.memMu.RLock()
	defer c.memMu.RUnlock()
	if c.freed {
		return c.closedErr()
	}
	if rc := C.kvd_qp_silence(c.qp.q); rc != 0 {
		return fmt.Errorf("rdma: silence QP: errno %d", -int(rc))
	}
	return nil
}

// takeMsgCreditNow takes a message credit if one is free (tests).
func (c *conn) takeMsgCreditNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.msgCredits == 0 {
		return false
	}
	c.msgCredits--
	return true
}
