package client

import (
	"context"
	"errors"
	"sync"

	"github.com/kvd-project/kvd/internal/wire"
)

// suspects are the nodes that let an attempt time out (Config.
// AttemptTimeout) and have not answered since: a stalled or frozen leader,
// typically, which the other nodes still name as leader until they elect
// another. Leader-bound requests leave them out while any other node is
// left (targets), and do not follow a NotLeader answer to one. A probe
// clears the mark as soon as the node answers again, or fails in a way that
// attempts see quickly too (refused, reset).
type suspects struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func (s *suspects) has(addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[addr]
	return ok
}

// add marks addr, reporting whether it was not marked already.
func (s *suspects) add(addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[addr]; ok {
		return false
	}
	if s.m == nil {
		s.m = map[string]struct{}{}
	}
	s.m[addr] = struct{}{}
	return true
}

func (s *suspects) remove(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, addr)
}

// markSuspect marks addr and, if it was not marked, starts its probe.
func (c *Client) markSuspect(addr string) {
	if c.suspect.add(addr) {
		go c.probe(addr)
	}
}

// probe asks a suspect for a ReadIndex GET, one request at a time, until it
// answers (whatever the answer: not leader, not found, a value) or fails
// quickly, and then clears the mark. A ReadIndex read goes through the
// node's Raft loop, so a node that answers it is not stalled there (a
// hello alone would not show that). It ends when the client closes.
func (c *Client) probe(addr string) {
	defer c.suspect.remove(addr)
	req := wire.Request{Op: wire.OpGet, Flags: wire.ReadIndex, Key: []byte(probeKey)}
	for !c.closed.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RequestTimeout)
		r := req
		_, err := c.callAt(ctx, addr, &r)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errStalled) {
			return
		}
	}
}

// probeKey is the key probes read; any key would do.
const probeKey = "kvd-probe"
