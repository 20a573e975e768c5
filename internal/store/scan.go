package store

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvd-project/kvd/internal/revision"
)

// Scan calls fn for the applied keys k with start <= k < end, in key order,
// from one point-in-time view of the applied state, and returns the
// applied index and store revision of that view: the state fn saw is exactly the state as of
// that index. An empty start is the first key and an empty end no upper
// bound. key and value are valid only during the call; fn returns false
// to stop the walk. Only user keys are seen: metadata, the log, the
// member book and other generations lie outside the walk's bounds, and a
// deleted key is not in the state at all.
func (s *Store) Scan(start, end []byte, fn func(key, value []byte, m revision.Meta) bool) (applied, rev uint64, err error) {
	snap, gen, applied, err := s.view()
	if err != nil {
		return 0, 0, err
	}
	defer snap.Close()
	if rev, err = revisionAt(snap, gen); err != nil {
		return 0, 0, err
	}
	opts := pebble.IterOptions{LowerBound: appendKVKey(nil, gen, start), UpperBound: genEnd(gen)}
	if len(end) > 0 {
		opts.UpperBound = appendKVKey(nil, gen, end)
	}
	it, err := snap.NewIter(&opts)
	if err != nil {
		return 0, 0, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		m, v, err := SplitValue(it.Value())
		if err != nil {
			return 0, 0, err
		}
		if !fn(it.Key()[kvKeyHeader:], v, m) {
			break
		}
	}
	return applied, rev, it.Error()
}

// GetMany calls fn for each key, in order, with its value and revision
// metadata from one point-in-time view (found false: the key is not in
// it), and returns the applied index and store revision of that view. value is valid only
// during the call.
func (s *Store) GetMany(keys [][]byte, fn func(i int, value []byte, m revision.Meta, found bool)) (applied, rev uint64, err error) {
	snap, gen, applied, err := s.view()
	if err != nil {
		return 0, 0, err
	}
	defer snap.Close()
	if rev, err = revisionAt(snap, gen); err != nil {
		return 0, 0, err
	}
	var kb []byte
	for i, k := range keys {
		kb = appendKVKey(kb[:0], gen, k)
		raw, c, err := snap.Get(kb)
		if errors.Is(err, pebble.ErrNotFound) {
			fn(i, nil, revision.Meta{}, false)
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		m, v, err := SplitValue(raw)
		if err != nil {
			c.Close()
			return 0, 0, err
		}
		fn(i, v, m, true)
		c.Close()
	}
	return applied, rev, nil
}

// revisionAt reads the store revision as a snapshot of the database has
// it (written by the same batches as the state).
func revisionAt(snap *pebble.Snapshot, gen uint64) (uint64, error) {
	rev, _, err := revsAt(snap, gen)
	return rev, err
}

// view opens a point-in-time view of the applied state and reads its
// applied index; the caller closes snap.
func (s *Store) view() (snap *pebble.Snapshot, gen uint64, applied uint64, err error) {
	s.genMu.RLock()
	gen = s.gen
	snap = s.db.NewSnapshot()
	s.genMu.RUnlock()
	if applied, err = appliedAt(snap); err != nil {
		snap.Close()
		return nil, 0, 0, err
	}
	return snap, gen, applied, nil
}
