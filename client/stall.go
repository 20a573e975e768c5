package client

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Stalled nodes and one-sided reads.
//
// An RPC attempt is bounded by AttemptTimeout with a timer of its own
// (attempt). A one-sided GET cannot afford one: over TCP every GET waits
// for its READs, and a timer is an allocation and a timer-heap insert on
// the path that is otherwise free of both. Without any bound, though, a
// client that only reads never leaves a node that stopped answering (a
// frozen leader over TCP, a network that drops everything): each GET waits
// out its whole context and the next one goes to the same node.
//
// So each node counts the one-sided attempts it started and finished
// (attempts), and one watchdog goroutine per client looks at every node
// each AttemptTimeout/4: a node with an attempt outstanding that has
// finished none for AttemptTimeout plus one such period is stalled. The
// watchdog marks it suspect and forgets it as leader, as a timed-out RPC
// attempt does, and closes its connection, which ends the READs waiting on
// it: those GETs retry at the next node at once, and later ones start
// there. A stall is noticed between 1 and 1.5 AttemptTimeouts after the
// stalled attempt began (after its node last finished one). A node that
// keeps answering some READs is not stalled, even if one READ is slow.
// Per GET this costs two atomic additions.

// attempts counts a node's one-sided attempts. The counters are the GETs';
// last and since are the watchdog's alone.
type attempts struct {
	started, finished atomic.Uint64
	seen              bool   // the watchdog has looked before
	last              uint64 // finished, as the watchdog last saw it
	since             mono   // when it saw finished move, or nothing outstanding
}

func (a *attempts) begin() { a.started.Add(1) }
func (a *attempts) end()   { a.finished.Add(1) }

// stalled is the watchdog's look at a at now: whether an attempt has been
// outstanding, with none finished, for longer than limit.
func (a *attempts) stalled(now mono, limit time.Duration) bool {
	finished := a.finished.Load()
	if !a.seen || finished != a.last || a.started.Load() == finished {
		a.seen, a.last, a.since = true, finished, now
		return false
	}
	return now.sub(a.since) > limit
}

// errStalled is why the watchdog closed a node's connection. It is a
// timeout of the node's, not of any caller's context, so it does not wrap
// context.DeadlineExceeded: callers test that for their own deadline (the
// client's own checks for a timed-out node test errStalled too).
var errStalled = errors.New("no one-sided READ answered within the attempt timeout")

// watchStalls is the watchdog: it runs until the client closes.
func (c *Client) watchStalls() {
	period := c.cfg.AttemptTimeout / 4
	t := time.NewTicker(period)
	defer t.Stop()
	var nodes []*node
	for {
		select {
		case <-c.life.Done():
			return
		case <-t.C:
		}
		nodes = nodes[:0]
		c.mu.Lock()
		for _, n := range c.nodes {
			nodes = append(nodes, n)
		}
		c.mu.Unlock()
		now := c.now()
		for _, n := range nodes {
			if n.attempts.stalled(now, c.cfg.AttemptTimeout+period) {
				c.dropNode(n, errStalled)
				n.close(fmt.Errorf("%w: %s: %w (%v)", ErrUnavailable, n.addr, errStalled, c.cfg.AttemptTimeout))
			}
		}
		clear(nodes)
	}
}
