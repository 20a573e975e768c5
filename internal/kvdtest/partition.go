package kvdtest

import (
	"sync"

	"github.com/kvd-project/kvd/transport/tcp"
)

// Network partitions between in-process nodes, through the TCP transport's
// Filter: while two nodes are cut apart, Raft messages between them are
// dropped and one-sided READs between them fail, but connections stay open,
// so healing restores them exactly. Clients are never cut off (a client's
// transport has no node name the filters know). A restarted node (Start)
// has a new transport and starts uncut.

// cutSet is the set of peer addresses one transport drops.
type cutSet struct {
	mu sync.Mutex
	m  map[string]bool
}

func (c *cutSet) has(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[addr]
}

func (c *cutSet) set(addr string, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cut {
		c.m[addr] = true
	} else {
		delete(c.m, addr)
	}
}

// newCutSet installs on tr the filter that drops the traffic of the
// addresses in the returned set (node names are the nodes' addresses:
// Start sets them so).
func newCutSet(tr *tcp.Transport) *cutSet {
	cs := &cutSet{m: map[string]bool{}}
	tr.SetFilter(func(_, remote string) bool { return cs.has(remote) })
	return cs
}

// Isolate cuts n off from each of peers, in both directions (each end drops
// the other's traffic). Every node must be running.
func (n *Node) Isolate(peers ...*Node) {
	for _, p := range peers {
		n.cuts.set(p.Addr, true)
		p.cuts.set(n.Addr, true)
	}
}

// Rejoin heals the cuts Isolate made between n and each of peers.
func (n *Node) Rejoin(peers ...*Node) {
	for _, p := range peers {
		n.cuts.set(p.Addr, false)
		p.cuts.set(n.Addr, false)
	}
}
