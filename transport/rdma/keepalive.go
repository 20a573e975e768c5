//go:build rdma

package rdma

import (
	"fmt"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// An RC queue pair learns that its peer is gone only from work it has
// outstanding: the ACK timeout and retries (Config.AckTimeout, RetryCount)
// fail it. A dead host sends no disconnect, so a connection with nothing
// to do would never notice, and would keep its memory (and, on a client,
// its leader) forever. So a connection that has seen no completion for
// Config.KeepAlive posts one zero-length RDMA READ: the peer's device
// answers it without its CPU (a zero-length READ needs no memory key, IB
// C9-88), and if nothing answers, the READ fails like any other work
// request, within the same bound.

// keepAlive is the goroutine that posts keepalives (KeepAlive > 0).
func (t *Transport) keepAlive() {
	defer close(t.kaDone)
	tick := time.NewTicker(t.cfg.KeepAlive / keepAliveTicks)
	defer tick.Stop()
	var idle []*conn
	for {
		select {
		case <-t.kaStop:
			return
		case <-tick.C:
		}
		t.connsMu.RLock()
		for _, c := range t.conns {
			if c.ka.tick(c.ready.Load()) {
				idle = append(idle, c)
			}
		}
		t.connsMu.RUnlock()
		for i, c := range idle {
			c.postKeepAlive()
			// Its completion raises no event by itself (poller.go,
			// "Arming"); a failed arm fails the CQ's queue pairs anyway.
			_ = t.armNext(c.cq, true)
			idle[i] = nil
		}
		idle = idle[:0]
	}
}

// postKeepAlive posts a keepalive READ unless one is outstanding.
func (c *conn) postKeepAlive() {
	c.memMu.RLock()
	defer c.memMu.RUnlock()
	if c.freed || !c.ka.out.CompareAndSwap(false, true) {
		return
	}
	// It is also a fence: its completion retires the unsignalled SENDs
	// before it (sendq.go), so an idle connection holds no buffers long.
	c.sqMu.Lock()
	defer c.sqMu.Unlock()
	c.kaPos = c.sq.fence()
	if err := c.qp.postKeepAlive(wrID(c.id, kindKeepAlive, 0, 0)); err != nil {
		c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
	}
}
