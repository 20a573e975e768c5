package store

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvd-project/kvd/internal/revision"
)

// View is a point-in-time, read-only view of the applied KV state and the
// applied index it is the state of, for readers that walk the whole state
// (a backup) without holding up the raft loop: it pins a Pebble snapshot,
// not a lock, so writes go on while it is read. It must be Closed.
type View struct {
	snap         *pebble.Snapshot
	gen          uint64
	applied      uint64
	rev, compact uint64
}

// View opens a view of the current applied state.
func (s *Store) View() (*View, error) {
	snap, gen, applied, err := s.view()
	if err != nil {
		return nil, err
	}
	rev, compact, err := revsAt(snap, gen)
	if err != nil {
		snap.Close()
		return nil, err
	}
	return &View{snap: snap, gen: gen, applied: applied, rev: rev, compact: compact}, nil
}

// appliedAt reads the applied index as a snapshot of the database has it:
// the index of exactly the KV state that snapshot holds (both are written
// by the same batches).
func appliedAt(snap *pebble.Snapshot) (uint64, error) {
	raw, c, err := snap.Get(keyApplied)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	defer c.Close()
	return decodeU64(raw)
}

// Applied is the index of the state the view holds.
func (v *View) Applied() uint64 { return v.applied }

// ForEach calls fn for every key of the view in key order. key and value
// are valid only during the call; an error from fn stops the walk and is
// returned.
func (v *View) ForEach(fn func(key, value []byte, m revision.Meta) error) error {
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: genPrefix(v.gen), UpperBound: genEnd(v.gen)})
	if err != nil {
		return err
	}
	defer it.Close()
	return walkKV(it, fn)
}

// Leases returns every lease of the view, in id order.
func (v *View) Leases() ([]Lease, error) {
	it, err := v.snap.NewIter(leaseRecBounds(v.gen))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	return readLeases(it)
}

// Revisions is the store revision of the view's state and its compaction
// revision.
func (v *View) Revisions() (rev, compacted uint64) { return v.rev, v.compact }

// Close releases the view's Pebble snapshot.
func (v *View) Close() error { return v.snap.Close() }
