package rdma

// Selective signalling. Only some SENDs ask for a completion; the others
// are retired when a later signalled work request completes (an RC send
// queue completes in order, so that completion says every earlier one has
// completed too). A SEND's buffer is reused only once it is retired. The
// bookkeeping is here, without cgo, so host tests reach it.

// sendQueue is the SENDs a connection has posted and not yet retired, in
// posting order (the order the device executes them; callers post under
// the same lock). Entries are buffer indexes, with sqCtl marking a
// credit-message buffer. Every entry holds a buffer, so the queue never
// holds more than the connection's send and credit-message buffers.
type sendQueue struct {
	ring       []uint16
	head, tail uint64 // retired, posted (ring positions modulo len(ring))

	// SENDs posted unsignalled since the last signalled work request, per
	// pool, and how many make the next one signalled: fewer than each
	// pool's size, so a sender that runs out of buffers always has a
	// signalled SEND in flight that will give some back.
	unsigData, unsigCtl int
	everyData, everyCtl int

	// sigOut is how many signalled SENDs are posted and not completed. A
	// SEND posted when there is none is signalled too: a connection that
	// sends one message at a time (request, reply) then sees every
	// completion, as before, and holds no buffer while it waits, and the
	// completions that wake its poller come as often as its messages. Only
	// SENDs that overlap (a stream, fragments) are left unsignalled.
	sigOut int
}

// sqCtl marks a credit-message buffer in a sendQueue entry.
const sqCtl = 1 << 15

// newSendQueue makes a queue for sendBufs data buffers and ctl
// credit-message buffers that signals at least one SEND in every
// signalEvery (capped at half of each pool, at least 1).
func newSendQueue(sendBufs, ctl, signalEvery int) sendQueue {
	return sendQueue{
		ring:      make([]uint16, sendBufs+ctl),
		everyData: max(1, min(signalEvery, sendBufs/2)),
		everyCtl:  max(1, min(signalEvery, ctl/2)),
	}
}

// add records a SEND of entry e about to be posted and reports whether it
// must be signalled: when no signalled SEND is outstanding, when its pool
// has reached its limit of unsignalled SENDs, or always.
func (q *sendQueue) add(e uint16, always bool) bool {
	q.ring[q.tail%uint64(len(q.ring))] = e
	q.tail++
	signal := always || q.sigOut == 0
	if e&sqCtl != 0 {
		q.unsigCtl++
		signal = signal || q.unsigCtl >= q.everyCtl
	} else {
		q.unsigData++
		signal = signal || q.unsigData >= q.everyData
	}
	if signal {
		q.unsigData, q.unsigCtl = 0, 0
		q.sigOut++
	}
	return signal
}

// fence returns the position a signalled work request posted now (a
// keepalive READ) retires up to: everything posted before it.
func (q *sendQueue) fence() uint64 {
	q.unsigData, q.unsigCtl = 0, 0
	return q.tail
}

// retireThrough retires every entry up to and including e, whose signalled
// SEND has completed (each signalled SEND completes on its own, in order),
// passing each to free. It reports false if e is not queued (then nothing
// is retired).
func (q *sendQueue) retireThrough(e uint16, free func(uint16)) bool {
	n := uint64(len(q.ring))
	end := q.head
	for ; end < q.tail && q.ring[end%n] != e; end++ {
	}
	if end == q.tail {
		return false
	}
	q.retireBefore(end+1, free)
	q.sigOut--
	return true
}

// retireBefore retires every entry posted before position pos.
func (q *sendQueue) retireBefore(pos uint64, free func(uint16)) {
	n := uint64(len(q.ring))
	for ; q.head < pos && q.head < q.tail; q.head++ {
		free(q.ring[q.head%n])
	}
}

// pending is how many SENDs are posted and not retired.
func (q *sendQueue) pending() int { return int(q.tail - q.head) }
