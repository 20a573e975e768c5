package store

import (
	"github.com/kvd-project/kvd/internal/revision"
)

// View is a point-in-time, read-only view of the applied KV state and the
// applied index it is the state of, for readers that walk the whole state
// (a backup) without holding up the raft loop: it pins a Pebble snapshot
// and a clone of the key index, not a lock, so writes go on while it is
// read. It must be Closed.
type View struct{ v *readView }

// View opens a view of the current applied state.
func (s *Store) View() (*View, error) { return &View{v: s.readView()}, nil }

// Applied is the index of the state the view holds.
func (v *View) Applied() uint64 { return v.v.applied }

// ForEach calls fn for every key of the view in key order. key and value
// are valid only during the call; an error from fn stops the walk and is
// returned.
func (v *View) ForEach(fn func(key, value []byte, m revision.Meta) error) error {
	return v.v.forEach(fn)
}

// Leases returns every lease of the view, in id order.
func (v *View) Leases() ([]Lease, error) {
	it, err := v.v.snap.NewIter(leaseRecBounds(v.v.gen))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	return readLeases(it)
}

// Revisions is the store revision of the view's state and its compaction
// revision.
func (v *View) Revisions() (rev, compacted uint64) { return v.v.rev, v.v.compact }

// Close releases the view's Pebble snapshot, and lets compaction passes
// that waited for it go on.
func (v *View) Close() error {
	v.v.close()
	return nil
}
