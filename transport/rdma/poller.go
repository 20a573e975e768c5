//go:build rdma

package rdma

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// Completion queues are shared by connections: each connection reserves room
// for every completion its queue pair can produce (all its work requests,
// flushed ones included), so a CQ can never overflow; a new CQ is created
// when none has room. One goroutine reaps them all, so one ibv_poll_cq
// crossing serves completions of many connections.
//
// Arming. A CQ raises an event (a wake-up of the reaper through the
// completion channel) only for the completions it is armed for, and the
// reaper arms its CQs for solicited completions only: the receive
// completions of messages, whose SENDs all carry the solicited flag (and,
// on rxe, flushed receives, so a failed queue pair still wakes the
// reaper). The completions of a node's own work — its READs, its SENDs,
// its fences — raise no event by themselves. Most are reaped by the
// goroutine that waits for them while it spins (spinWait), or by the next
// drain of the CQ for a message; a goroutine that is about to sleep until
// one (sleepOn), and the keepalive goroutine after posting one
// (armNext), first arm the CQ for its next completion of any kind and
// then reap it once more, so a completion that came before the arm is not
// missed either. Why: under Soft-RoCE a READ completes inside the posting
// call, and with every completion armed each one-sided GET also woke the
// reaper on another CPU (an event read, an acknowledgement, a re-arm): the
// GET took 4× ib_read_lat instead of 2.6× at 16 B. While any goroutine
// sleeps on a CQ the reaper re-arms it for any completion after each event
// (sleepers), so a device on which a solicited-only arm would replace a
// pending request for the next completion loses no wake-up.

const (
	cqDepth   = 8192
	pollBatch = 64
)

type cq struct {
	h     cqHandle
	index int
	size  int
	used  int // reserved entries; guarded by Transport.cqMu

	// sleepers counts goroutines asleep until a completion that raises no
	// event by itself (sleepOn).
	sleepers atomic.Int32

	// Polling state, guarded by mu (the poller and a closing connection's
	// final drain may poll concurrently).
	mu      sync.Mutex
	wcs     []wc // C memory
	touched []*conn
}

// reserveCQ finds (or creates) a CQ with room for n more completions.
func (t *Transport) reserveCQ(n int) (*cq, error) {
	t.cqMu.Lock()
	defer t.cqMu.Unlock()
	for _, q := range t.cqs {
		if q.size-q.used >= n {
			q.used += n
			return q, nil
		}
	}
	size := max(cqDepth, n)
	if size > t.attr.maxCQE {
		size = t.attr.maxCQE
	}
	if n > size {
		return nil, fmt.Errorf("rdma: a connection needs %d completion entries, the device allows %d per CQ: %w",
			n, t.attr.maxCQE, ErrConfig)
	}
	h, err := createCQ(t.dev, size, t.comp, len(t.cqs))
	if err != nil {
		return nil, err
	}
	q := &cq{h: h, index: len(t.cqs), size: size, used: n, wcs: wcArray(pollBatch)}
	t.cqs = append(t.cqs, q)
	list := append([]*cq(nil), t.cqs...)
	t.cqList.Store(&list)
	return q, nil
}

func (t *Transport) releaseCQ(q *cq, n int) {
	t.cqMu.Lock()
	q.used -= n
	t.cqMu.Unlock()
}

func (t *Transport) cqAt(i uint64) *cq {
	t.cqMu.Lock()
	defer t.cqMu.Unlock()
	if i >= uint64(len(t.cqs)) {
		return nil
	}
	return t.cqs[i]
}

// poll is the reaper goroutine.
func (t *Transport) poll() {
	defer close(t.pollDone)
	if t.cfg.Poll == PollBusy {
		t.pollBusy()
		return
	}
	t.pollEvents()
}

func (t *Transport) pollBusy() {
	for !t.stopPoll.Load() {
		n := 0
		for _, q := range *t.cqList.Load() {
			n += t.drain(q)
		}
		if n == 0 {
			runtime.Gosched()
		}
	}
}

func (t *Transport) pollEvents() {
	raw, err := t.compFile.SyscallConn()
	if err != nil {
		return
	}
	var ctxs [pollBatch]uint64
	var n int
	var perr error
	ready := func(uintptr) bool { // made once: no allocation per wake-up
		n, perr = t.comp.events(ctxs[:])
		return n > 0 || perr != nil
	}
	for {
		err := raw.Read(ready)
		if err != nil || perr != nil {
			return // closed
		}
		t.cqEvents.Add(uint64(n))
		got := 0
		for _, i := range ctxs[:n] {
			if q := t.cqAt(i); q != nil {
				if q.sleepers.Load() > 0 {
					_ = q.h.armNext() // a failed CQ fails its queue pairs too
				}
				got += t.drain(q)
			}
		}
		// Nothing reaped: a waiter polling for itself got there first, and
		// is handling the burst. Otherwise more is likely to follow.
		if got > 0 && t.spin > 0 {
			t.spinAll()
		}
	}
}

// spinAll is the reaper's adaptive phase (PollEvents with SpinPoll): it
// keeps polling every CQ until SpinPoll passes without a completion. The
// CQs stay armed meanwhile (kvd_cq_events re-armed them), so a completion
// that arrives while spinning also leaves an event on the channel: the next
// raw.Read returns at once, finds the CQs empty and sleeps. A CQ another
// goroutine is draining is skipped: that goroutine delivers what it finds.
func (t *Transport) spinAll() {
	last := time.Now()
	for !t.stopPoll.Load() {
		n := 0
		for _, q := range *t.cqList.Load() {
			if q.mu.TryLock() {
				n += t.drainLocked(q)
				q.mu.Unlock()
			}
		}
		now := time.Now()
		if n > 0 {
			last = now
		} else if now.Sub(last) >= t.spin {
			return
		}
		runtime.Gosched()
	}
}

// spinWait is the waiter's adaptive phase (PollEvents with SpinPoll): a
// goroutine about to sleep until ready() (its Read completed, a message
// arrived) first polls c's CQ itself for up to SpinPoll, yielding between
// polls, and handles what it reaps like the reaper would (for every
// connection on that CQ). It reports whether ready() became true; either
// way the caller then does its usual blocking wait, which returns at once if
// it did. ready must be cheap and must not block.
func (c *conn) spinWait(ready func() bool) bool {
	t, q := c.t, c.cq
	if t.spin <= 0 || q == nil {
		return false
	}
	var start time.Time
	for i := 0; ; i++ {
		if ready() {
			return true
		}
		select {
		case <-c.closed:
			return false
		default:
		}
		// cqLife keeps the CQ from being destroyed under us (Transport.Close
		// write-locks it once the reaper is gone); never wait for it.
		if !t.cqLife.TryRLock() {
			return false
		}
		if t.stopPoll.Load() {
			t.cqLife.RUnlock()
			return false
		}
		if q.mu.TryLock() { // else another goroutine is draining q
			t.drainLocked(q)
			q.mu.Unlock()
		}
		t.cqLife.RUnlock()
		if ready() {
			return true
		}
		if i == 0 {
			start = time.Now()
		} else if time.Since(start) >= t.spin {
			return false
		}
		runtime.Gosched()
	}
}

// sleepOn prepares a goroutine to sleep until a completion of its own work
// on q (see "Arming"): it counts the sleeper, then arms q for its next
// completion and reaps what came before. The caller calls woke once awake,
// whatever sleepOn returned; an error means the device refused the arm
// (fail the connection: the wake-up might never come).
func (t *Transport) sleepOn(q *cq) error {
	if q == nil {
		return nil
	}
	q.sleepers.Add(1)
	return t.armNext(q, true)
}

// sleepOnOwnWork is sleepOn for c's CQ; a refused arm fails c. The caller
// calls c.t.woke(c.cq) once awake.
func (c *conn) sleepOnOwnWork() {
	if err := c.t.sleepOn(c.cq); err != nil {
		c.fail(err)
	}
}

// woke ends a sleepOn.
func (t *Transport) woke(q *cq) {
	if q != nil {
		q.sleepers.Add(-1)
	}
}

// armNext arms q for its next completion of any kind and, if reap, reaps q,
// so every completion of work posted before the call is reaped now or
// raises an event. Callers that may be inside a drain of q do not reap
// (a completion that came before the arm then waits for the next drain:
// the next message, or a keepalive's at the latest). A no-op in PollBusy
// mode (nothing sleeps) and once the transport is closing (its connections
// are failing, which wakes their waiters).
func (t *Transport) armNext(q *cq, reap bool) error {
	if q == nil || t.comp.ch == nil || !t.cqLife.TryRLock() {
		return nil
	}
	defer t.cqLife.RUnlock()
	if t.stopPoll.Load() {
		return nil
	}
	if err := q.h.armNext(); err != nil {
		return fmt.Errorf("%w: %w", err, transport.ErrClosed)
	}
	if reap {
		t.drain(q)
	}
	return nil
}

// drain reaps q until it is empty and hands each completion to its
// connection; it returns how many it reaped.
func (t *Transport) drain(q *cq) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return t.drainLocked(q)
}

// drainLocked is drain with q.mu held. Connections see their completions of
// one burst through complete, then one afterBatch call, all while connsMu is
// read-held (so a connection being torn down is not touched once removeConn
// returns).
func (t *Transport) drainLocked(q *cq) int {
	total := 0
	t.connsMu.RLock()
	for {
		n, err := q.h.poll(q.wcs)
		if err != nil || n == 0 {
			break
		}
		for i := range q.wcs[:n] {
			id, status, byteLen := wcFields(&q.wcs[i])
			c := t.conns[uint32(id>>32)]
			if c == nil {
				continue // a closed connection's leftovers
			}
			if !c.inBatch {
				c.inBatch = true
				q.touched = append(q.touched, c)
			}
			c.complete(id, status, byteLen)
		}
		total += n
		if n < len(q.wcs) {
			break
		}
	}
	for i, c := range q.touched {
		c.inBatch = false
		c.afterBatch()
		q.touched[i] = nil
	}
	q.touched = q.touched[:0]
	t.connsMu.RUnlock()
	return total
}
