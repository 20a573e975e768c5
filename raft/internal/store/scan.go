package store

import (
	"github.com/cockroachdb/pebble/v2"
)

// Scan calls fn for the applied keys k with start <= k < end, in key order,
// from one point-in-time view of the applied state, and returns the
// applied index of that view: the state fn saw is exactly the state as of
// that index. An empty start is the first key and an empty end no upper
// bound. key and value are valid only during the call; fn returns false
// to stop the walk. Only user keys are seen: metadata, the log, the
// member book and other generations lie outside the walk's bounds, and a
// deleted key is not in the state at all.
func (s *Store) Scan(start, end []byte, fn func(key, value []byte, version uint64) bool) (applied uint64, err error) {
	s.genMu.RLock()
	gen := s.gen
	snap := s.db.NewSnapshot()
	s.genMu.RUnlock()
	defer snap.Close()
	applied, err = appliedAt(snap)
	if err != nil {
		return 0, err
	}
	opts := pebble.IterOptions{LowerBound: appendKVKey(nil, gen, start), UpperBound: genEnd(gen)}
	if len(end) > 0 {
		opts.UpperBound = appendKVKey(nil, gen, end)
	}
	it, err := snap.NewIter(&opts)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		version, v, err := SplitValue(it.Value())
		if err != nil {
			return 0, err
		}
		if !fn(it.Key()[kvKeyHeader:], v, version) {
			break
		}
	}
	return applied, it.Error()
}
