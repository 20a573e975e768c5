package client

import (
	"sync"
	"sync/atomic"
)

// clusterPin is the cluster a client talks to: Config.ClusterID, else the
// first id a node's hello names. Every connection is checked against it
// before its first request, so that a client never mixes the answers of
// two clusters (a node bootstrapped alone by mistake, an endpoint list
// that names another cluster's node).
type clusterPin struct {
	id   atomic.Uint64
	mu   sync.Mutex
	from string // the endpoint the id was learned from; "" if configured
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
		p.id.Store(got)
		p.from = n.addr
		return nil
	case want == got:
		return nil
	}
	return &ClusterMismatchError{Endpoint: n.addr, Got: got, Want: want, From: p.from}
}
