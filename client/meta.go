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

// servesRevisions reports whether the cluster's servers keep revisions:
// a node the client is connected to (it connects to one if none) runs
// table layout 4 or later (one cluster runs one data format: its members
// refuse peers of another). Only then does the client ask for what an
// older server refuses (each key's whole metadata, pages pinned to a
// revision); against an older server it reads as before.
func (c *Client) servesRevisions(ctx context.Context) bool {
	c.mu.Lock()
	for _, n := range c.nodes {
		if g := n.geo.Load(); g != nil {
			c.mu.Unlock()
			return g.hdr.Version >= table.LayoutVersion
		}
	}
	c.mu.Unlock()
	for _, addr := range c.targets() {
		if n, err := c.nodeFor(ctx, addr); err == nil {
			if g := n.geo.Load(); g != nil {
				return g.hdr.Version >= table.LayoutVersion
			}
		}
	}
	return true // no node answers: the request fails on its own
}
