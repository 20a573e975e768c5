package client

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// clusterPin is the cluster a client talks to: Config.ClusterID, else the
// one most of its endpoints name when it first needs a node (settle), else
// the first id a node's hello names. Every connection is checked against
// it before its first request, so that a client never mixes the answers of
// two clusters (a node bootstrapped alone by mistake, an endpoint list
// that names another cluster's node).
type clusterPin struct {
	id      atomic.Uint64
	mu      sync.Mutex
	from    string // where the id was learned, for errors; "" if configured
	settled sync.Once
}

// check admits n if its cluster is the pinned one (pinning it if none is),
// or names none (a node older than the id, or one joining that has not
// learned it yet).
func (p *clusterPin) check(n *node) error {
	got := n.hello.ClusterID
	if got == 0 || p.id.Load() == got {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	want := p.id.Load()
	switch {
	case want == 0:
		p.pinLocked(got, n.addr+", the first endpoint this client reached")
		return nil
	case want == got:
		return nil
	}
	return &ClusterMismatchError{Endpoint: n.addr, Got: got, Want: want, From: p.from}
}

func (p *clusterPin) pinLocked(id uint64, from string) {
	p.id.Store(id)
	p.from = from
}

// settle runs once, at the client's first connection to a node (first):
// unless the client was given its cluster, it asks every other endpoint at
// once and pins the cluster a strict majority of them name, as soon as
// they have. The first endpoint alone would decide otherwise, and a node
// of another cluster listed first (one started by mistake without
// --initial-cluster) would take every request. The connections are kept
// for later requests; an endpoint that is slow to answer delays only this
// first request, and only while no majority agrees without it, for at
// most settleWait. With no majority by then (as many endpoints of one
// cluster as of another, or too many down or slow), the first hello
// checked pins, as without settling.
func (c *Client) settle(ctx context.Context, first *node) {
	c.cluster.settled.Do(func() {
		eps := c.cfg.Endpoints
		if c.cluster.id.Load() != 0 || len(eps) < 2 || first.hello.ClusterID == 0 {
			return // given, nothing to compare, or a node that names none
		}
		timer := time.NewTimer(c.settleWait())
		defer timer.Stop()
		type vote struct {
			addr string
			id   uint64
			ok   bool
		}
		votes := make(chan vote, len(eps)) // the dials left behind finish into it
		for _, ep := range eps {
			if ep == first.addr {
				votes <- vote{ep, first.hello.ClusterID, true}
				continue
			}
			go func() {
				n, _, err := c.connect(ctx, ep)
				if err != nil {
					votes <- vote{addr: ep}
					return
				}
				votes <- vote{ep, n.hello.ClusterID, true}
			}()
		}
		by := map[uint64][]string{}
		for range eps {
			var v vote
			select {
			case v = <-votes:
			case <-timer.C:
				return
			case <-ctx.Done():
				return
			}
			if !v.ok {
				continue
			}
			by[v.id] = append(by[v.id], v.addr)
			if len(by[v.id]) <= len(eps)/2 {
				continue
			}
			if v.id != 0 {
				c.cluster.mu.Lock()
				if c.cluster.id.Load() == 0 {
					c.cluster.pinLocked(v.id, strings.Join(by[v.id], ", ")+", most of the endpoints")
				}
				c.cluster.mu.Unlock()
			}
			return
		}
	})
}

// settleWait bounds how long settle waits for a majority: half an attempt,
// so that the request that waits still has time for its node, and at most
// a dial.
func (c *Client) settleWait() time.Duration {
	if d := c.cfg.AttemptTimeout / 2; d > 0 && d < c.cfg.DialTimeout {
		return d
	}
	return c.cfg.DialTimeout
}
