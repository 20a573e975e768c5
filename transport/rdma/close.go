//go:build rdma

package rdma

import (
	"context"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// How a connection ends: fail (any cause, once) wakes every waiter and
// starts teardown; Close adds a short linger for posted SENDs; the watcher
// turns connection-manager events into failures.

var (
	errLocalClose = fmt.Errorf("rdma: connection closed: %w", transport.ErrClosed)
	errPeerClose  = fmt.Errorf("rdma: connection closed by peer: %w", transport.ErrClosed)
)

func (c *conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return errLocalClose
	}
	return c.err
}

// fail closes the connection because of cause: every waiter wakes and fails,
// and teardown runs in the background (fail may be called by the poller,
// which teardown waits for).
func (c *conn) fail(cause error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.err = cause
		c.mu.Unlock()
		close(c.closed)
		go c.teardown()
	})
}

// closeLinger bounds how long Close waits for posted SENDs to be
// acknowledged, so that messages sent just before Close still arrive.
const closeLinger = 2 * time.Second

// Close lets posted SENDs complete, then disconnects (the peer's pending and
// later operations fail with ErrClosed) and frees everything.
func (c *conn) Close() error {
	c.mu.Lock()
	c.closing = true
	pending := c.inflight > 0 && c.err == nil
	c.mu.Unlock()
	if pending {
		c.fence() // unsignalled SENDs would otherwise complete silently
		// The fence's completion raises no event by itself; if the arm
		// fails, the linger ends at the timer.
		_ = c.t.sleepOn(c.cq)
		timer := time.NewTimer(closeLinger)
		select {
		case <-c.idle:
		case <-c.closed:
		case <-timer.C:
		}
		timer.Stop()
		c.t.woke(c.cq)
	}
	c.localClose.Store(true)
	c.fail(errLocalClose)
	<-c.done
	return nil
}

// teardown frees everything in order: queue pair (after disconnecting), the
// CQ's stale entries and reservation, memory registration and mapping, id,
// event channel.
func (c *conn) teardown() {
	c.settleFailed()
	// Wait out a step of setup in progress (dial, request) and stop later
	// ones: the id and the queue pair are freed below.
	c.setupMu.Lock()
	c.torn = true
	c.setupMu.Unlock()
	if c.cm.valid() && c.connected.Load() {
		c.cm.disconnect()
	}
	if c.ch != nil {
		c.ch.wakeUp()
	}
	c.mu.Lock()
	watchDone := c.watchDone
	c.mu.Unlock()
	if watchDone != nil {
		<-watchDone
	}
	c.t.removeConn(c)
	c.stopAssembler() // the poller hands it nothing more
	c.memMu.Lock()
	c.keepQueued()
	c.freed = true
	if c.qp.q != nil {
		c.cm.destroyQP(c.qp)
	}
	c.memMu.Unlock()
	if c.cq != nil {
		c.t.drain(c.cq) // the QP is gone; drop what it left behind
		c.t.releaseCQ(c.cq, c.cqResv)
	}
	if c.mr.m != nil {
		_ = c.mr.deregister()
		c.t.pinned.nConns.Add(-1)
	}
	if c.mem != nil {
		freeOffHeap(c.mem)
	}
	c.freeStaging()
	c.t.pinned.conns.Add(-c.pinned.Load())
	c.cm.destroy()
	if c.ch != nil {
		c.ch.destroy()
	}
	close(c.done)
	c.t.connDone()
}

// keepQueued copies messages still in receive buffers to the Go heap, so
// Recv can hand out what arrived before the peer closed (memMu held).
func (c *conn) keepQueued() {
	n := len(c.rq)
	for range n {
		select {
		case d := <-c.rq:
			if d.buf >= 0 {
				d.data = append([]byte(nil), c.recvBuf(int(d.buf))[headerSize:headerSize+int(d.n)]...)
				d.buf = -1
			}
			c.rq <- d
		default:
		}
	}
}

// startWatch runs watch in the background unless the connection has
// already failed. The poller can fail a connection as soon as its receives
// are posted, before the dialer or the listener gets here; teardown then
// either saw no watcher (and none starts after it) or waits for this one,
// which its wakeUp ends.
func (c *conn) startWatch(established func(*conn)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.watchDone = make(chan struct{})
	go c.watch(established, c.watchDone)
}

// watch handles connection-manager events for the connection's life.
// established runs once the connection is up (passive side).
func (c *conn) watch(established func(*conn), done chan struct{}) {
	defer close(done)
	for {
		ev, err := c.ch.wait(context.Background())
		if err != nil {
			// Woken by teardown (then fail does nothing), or the channel
			// failed and disconnects would go unnoticed.
			c.fail(fmt.Errorf("rdma: connection manager: %w", err))
			return
		}
		switch ev.kind {
		case evEstablished:
			if established != nil {
				if h := c.t.auth.dropEstablished.Load(); h != nil && (*h)(c) {
					continue
				}
				c.connected.Store(true)
				established(c)
			}
		case evDisconnected:
			// Messages the peer sent before disconnecting completed
			// before this event; reap them so Recv can still return them.
			c.t.drain(c.cq)
			c.fail(errPeerClose)
		case evDeviceRemoval:
			c.fail(fmt.Errorf("rdma: device removed: %w", transport.ErrClosed))
		case evRejected, evConnectError, evUnreachable:
			c.fail(fmt.Errorf("rdma: connection failed: %v: %w", ev, transport.ErrClosed))
		}
	}
}
