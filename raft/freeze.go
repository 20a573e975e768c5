package raft

import (
	"errors"
	"sync/atomic"
	"time"
)

// ErrFrozen: Freeze was called on a node that is already frozen (or about
// to be).
var ErrFrozen = errors.New("raft: node is already frozen")

// freezeRequest asks the raft loop to stop for d; the loop closes started
// when it has.
type freezeRequest struct {
	d       time.Duration
	thaw    <-chan struct{} // closed to thaw before d (tests); nil: never
	started chan struct{}
}

// freezer is a node's freeze state (Node.frz); Open makes its channel.
type freezer struct {
	// busy is set from Freeze until the thaw: one freeze at a time.
	busy atomic.Bool
	// reqs hands a Freeze's request to the loop; unbuffered, so a send
	// completes only once the loop has taken it.
	reqs chan freezeRequest
}

// freezeRequests is the channel the loop selects on: a send comes only
// from a Freeze (nil, never ready, in a Node that Open did not make).
func (n *Node) freezeRequests() chan freezeRequest { return n.frz.reqs }

// Freeze stops the node's raft loop for d, as SIGSTOP stops a process: no
// ticks, no peer messages stepped, no Readies handled, nothing applied, no
// lease extended, nothing sent to peers. Work queues up meanwhile
// (proposals, reads, peer messages, until their queues are full and block
// their senders) and is taken up at the thaw, when the loop counts the
// ticks it missed as it does after any stall (see tick). The node thaws by
// itself after d; Close ends a freeze at once.
//
// Only the loop stops. Peer connections stay open and their goroutines
// keep reading until the loop's queue is full, Get and Status still
// answer, and a lease already granted simply runs out at its expiry. It is
// a fault for tests: a node whose leader process stalls (a long GC or
// swap pause, SIGSTOP, a paused VM) while its RDMA NIC goes on serving
// one-sided READs of its memory.
//
// Freeze returns once the loop has stopped (within a tick), ErrFrozen if
// the node is already frozen, or ErrStopped if it is closed.
func (n *Node) Freeze(d time.Duration) error { return n.freeze(d, nil) }

// freeze is Freeze with an early thaw: closing thaw ends the freeze before
// d. Tests use it to queue work behind a stopped loop for exactly as long
// as they need.
func (n *Node) freeze(d time.Duration, thaw <-chan struct{}) error {
	if d <= 0 {
		return nil
	}
	if !n.frz.busy.CompareAndSwap(false, true) {
		return ErrFrozen
	}
	f := freezeRequest{d: d, thaw: thaw, started: make(chan struct{})}
	select {
	case n.frz.reqs <- f: // the loop clears busy at the thaw
	case <-n.stopc:
		n.frz.busy.Store(false)
		return n.stoppedErr()
	case <-n.donec: // the loop stopped on a storage failure
		n.frz.busy.Store(false)
		return n.stoppedErr()
	}
	<-f.started
	return nil
}

// freeze is the loop's side of Freeze: it blocks for f.d, or until Close.
// It reports false if the node is closing.
func (l *loop) freeze(f freezeRequest) bool {
	defer l.n.frz.busy.Store(false)
	l.n.log.Warn("raft loop frozen (fault injection)", "for", f.d)
	t := time.NewTimer(f.d)
	defer t.Stop()
	close(f.started)
	select {
	case <-t.C:
	case <-f.thaw:
	case <-l.n.stopc:
		return false
	}
	l.n.log.Warn("raft loop thawed (fault injection)")
	return true
}
