package client

import (
	"context"

	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
)

// Meta is a key's revision metadata, with etcd's names and meanings. Every
// write request that changes the store takes the next store revision (one
// for a whole transaction), and each key it writes records it.
type Meta struct {
	// CreateRevision is the revision of the write that created the key
	// (since it last did not exist); 0 for an absent key.
	CreateRevision uint64
	// ModRevision is the revision of the key's last write.
	ModRevision uint64
	// Version counts the key's writes since it was created: 1 when
	// created, 0 for an absent key.
	Version uint64
	// Lease is the TTL lease the key is attached to (0: none).
	Lease LeaseID
}

func metaOf(m revision.Meta) Meta {
	return Meta{CreateRevision: m.Create, ModRevision: m.Mod, Version: m.Version, Lease: LeaseID(m.Lease)}
}

// keepsRevisions reports whether the node runs a server with revisions:
// its region is of table layout 4 or later (the same build). Only such a
// server takes what an older one refuses as a bad request: a GET's
// wire.GetMeta, a scan's metadata and revision.
func (n *node) keepsRevisions() bool {
	g := n.geo.Load()
	return g != nil && g.hdr.Version >= table.LayoutVersion
}

// servesRevisions reports whether the cluster's servers keep revisions,
// as a node the client is connected to tells (one cluster runs one data
// format: its members refuse peers of another). Without one, it connects
// to the first endpoint, as the request about to be sent would.
func (c *Client) servesRevisions(ctx context.Context) bool {
	c.mu.Lock()
	for _, n := range c.nodes {
		if n.geo.Load() != nil {
			c.mu.Unlock()
			return n.keepsRevisions()
		}
	}
	c.mu.Unlock()
	if t := c.targets(); len(t) > 0 {
		if n, err := c.nodeFor(ctx, t[0]); err == nil {
			return n.keepsRevisions()
		}
	}
	return true // the request fails on its own
}
