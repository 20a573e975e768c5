package client

import "github.com/kvd-project/kvd/internal/revision"

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
