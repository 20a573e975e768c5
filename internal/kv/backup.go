package kv

import (
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
)

// View is a point-in-time view of the node's applied KV state, for reading
// all of it without stalling writes (a backup: the node's raft.Restore
// starts a new cluster from one). Close it promptly: it holds a Pebble
// snapshot (older versions of keys are kept while it lives), and the
// node's Close waits for it.
type View struct {
	v       *store.View
	release func()
}

// View opens a view of the applied state. Like Scan it may be one batch
// ahead of the Publisher.
func (s *Store) View() (*View, error) {
	st, release, err := s.node.Acquire()
	if err != nil {
		return nil, err
	}
	v, err := st.View()
	if err != nil {
		release()
		return nil, err
	}
	return &View{v: v, release: release}, nil
}

// Applied is the index of the view's state.
func (v *View) Applied() uint64 { return v.v.Applied() }

// ForEach calls fn for every key in key order; key and value are valid only
// during the call. An error from fn stops the walk and is returned.
func (v *View) ForEach(fn func(key, value []byte, version uint64) error) error {
	return v.v.ForEach(fn)
}

// ForEachLeased is ForEach that also gives the lease each key is attached
// to (0: none).
func (v *View) ForEachLeased(fn func(key, value []byte, version, lease uint64) error) error {
	return v.v.ForEachLeased(fn)
}

// ForEachMeta is ForEach that gives each key's revision metadata (its
// lease included), as a backup carries it.
func (v *View) ForEachMeta(fn func(key, value []byte, m revision.Meta) error) error {
	return v.v.ForEachLeased(func(key, value []byte, version, lease uint64) error {
		return fn(key, value, storedMeta(version, lease))
	})
}

// storedMeta is the Meta of a key the store keeps as a version (the index
// of its last write) and a lease: created and last modified at that index,
// once, as a backup of the older formats has it. A store that keeps each
// key's Meta gives it as it is instead.
func storedMeta(version, lease uint64) revision.Meta {
	return revision.Meta{Create: version, Mod: version, Version: 1, Lease: lease}
}

// Revision is the store revision of the view's state and its compaction
// revision (0: none), which a backup's header carries. Until the store
// keeps a revision of its own, every key's Mod is an applied index, and
// the applied index stands for the revision, with nothing compacted.
func (v *View) Revision() (rev, compacted uint64) { return v.v.Applied(), 0 }

// Leases returns the view's TTL leases in id order: id, TTL as granted and
// keys attached (a deadline is not state: see lessor).
func (v *View) Leases() ([]store.Lease, error) { return v.v.Leases() }

// Close releases the view. It is idempotent.
func (v *View) Close() {
	if v.release != nil {
		v.v.Close()
		v.release()
		v.release = nil
	}
}
