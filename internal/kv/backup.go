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
func (v *View) ForEach(fn func(key, value []byte, m revision.Meta) error) error {
	return v.v.ForEach(fn)
}

// ForEachMeta is ForEach under the name a backup writer reads: each key's
// revision metadata carries its lease too.
func (v *View) ForEachMeta(fn func(key, value []byte, m revision.Meta) error) error {
	return v.v.ForEach(fn)
}

// Revision is the store revision of the view's state and its compaction
// revision (0: none), which a backup's header carries.
func (v *View) Revision() (rev, compacted uint64) { return v.v.Revisions() }

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
