package store

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/btree"

	"github.com/kvd-project/kvd/internal/revision"
)

// readView is a reader's point in time: the store revision and applied
// index published together, the compaction revision, a clone of the
// key index and a Pebble snapshot. All are taken under the store's mu,
// which the commit that publishes a revision holds, so the index holds
// every write at or below rev and the snapshot every record the index
// names there. The compactor deletes only for a compaction revision that
// was published (compact.go), so after the view was taken: the snapshot
// keeps what it deletes.
type readView struct {
	s                     *Store
	snap                  *pebble.Snapshot
	tree                  *btree.BTreeG[*ixKey]
	gen                   uint64
	applied, rev, compact uint64
	buf                   []byte
}

// readView takes a view of the published state; the caller closes it.
// Until then the compactor starts no pass beyond the view's compaction
// revision (views).
func (s *Store) readView() *readView {
	s.genMu.RLock()
	defer s.genMu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &readView{s: s, snap: s.db.NewSnapshot(), tree: s.ix.clone(), gen: s.gen,
		applied: s.applied, rev: s.rs.rev.Load(), compact: s.rs.compact.Load()}
	s.views.add(v.compact)
	return v
}

func (v *readView) close() {
	v.s.views.done(v.compact)
	v.snap.Close() // fails only if closed already
}

// viewSet counts the open views by the compaction revision each was
// taken at: a compaction pass to C waits for those below C to close,
// as they may read below C (keyindex.go). A view is taken under the
// store's mu, which the commit that publishes a compaction revision
// holds, so a view taken before C was published is counted before the
// pass to C can look.
type viewSet struct {
	mu sync.Mutex
	n  map[uint64]int
}

func (vs *viewSet) add(compact uint64) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.n == nil {
		vs.n = make(map[uint64]int)
	}
	vs.n[compact]++
}

func (vs *viewSet) done(compact uint64) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.n[compact]--; vs.n[compact] <= 0 {
		delete(vs.n, compact)
	}
}

// below reports whether a view taken at a compaction revision below c is
// open.
func (vs *viewSet) below(c uint64) bool {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	for compact := range vs.n {
		if compact < c {
			return true
		}
	}
	return false
}

// get calls fn with key's value and Meta at revision rev, if the key
// was present then; value is valid only during the call.
func (v *readView) get(key []byte, rev uint64, fn func(value []byte, m revision.Meta)) (found bool, err error) {
	e := find(v.tree, key)
	if e == nil {
		return false, nil
	}
	r, ok := at(e.state().revs, rev)
	if !ok || r.deleted {
		return false, nil
	}
	_, err = readValue(v.snap, v.gen, e.key, r, &v.buf, func(value []byte, m revision.Meta) bool {
		fn(value, m)
		return true
	})
	return err == nil, err
}

// rangeIndex calls fn for each key of t with start <= key < end (an
// empty end: no bound) present at revision rev, in key order, with its
// value read from r, until fn returns false.
func rangeIndex(t *btree.BTreeG[*ixKey], r pebble.Reader, gen uint64, start, end []byte, rev uint64,
	fn func(key, value []byte, m revision.Meta) bool) error {
	var err error
	var buf []byte
	ascend(t, start, end, func(e *ixKey) bool {
		x, ok := at(e.state().revs, rev)
		if !ok || x.deleted {
			return true
		}
		var more bool
		more, err = readValue(r, gen, e.key, x, &buf, func(value []byte, m revision.Meta) bool {
			return fn(e.key, value, m)
		})
		return more && err == nil
	})
	return err
}

// readValue reads the value of key's write x from its by-revision
// record in r and calls fn with it and the write's Meta; more is fn's
// answer.
func readValue(r pebble.Reader, gen uint64, key []byte, x ixRev, buf *[]byte, fn func(value []byte, m revision.Meta) bool) (more bool, err error) {
	*buf = appendOrderKey((*buf)[:0], gen, x.mod, x.seq, key)
	raw, c, err := r.Get(*buf)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return false, fmt.Errorf("%w: no history record %x for the index's write of %q", ErrCorrupt, *buf, key)
	case err != nil:
		return false, err
	}
	defer c.Close()
	m, value, deleted, err := decodeHistValue(raw)
	if err != nil {
		return false, err
	}
	if deleted || m.Mod != x.mod {
		return false, fmt.Errorf("%w: history record %x is not the index's write, a put at %d", ErrCorrupt, *buf, x.mod)
	}
	return fn(value, m), nil
}

// Get returns the applied value and revision metadata of key. The value is
// a copy.
func (s *Store) Get(key []byte) (value []byte, m revision.Meta, ok bool, err error) {
	v := s.readView()
	defer v.close()
	ok, err = v.get(key, v.rev, func(val []byte, meta revision.Meta) {
		value, m = append([]byte(nil), val...), meta
	})
	if err != nil || !ok {
		return nil, revision.Meta{}, false, err
	}
	return value, m, true, nil
}

// ForEach calls fn for every applied key in key order, from a point-in-time
// view. key and value are valid only during the call. An error from fn stops
// the walk and is returned.
func (s *Store) ForEach(fn func(key, value []byte, m revision.Meta) error) error {
	v := s.readView()
	defer v.close()
	return v.forEach(fn)
}

func (v *readView) forEach(fn func(key, value []byte, m revision.Meta) error) error {
	var ferr error
	err := rangeIndex(v.tree, v.snap, v.gen, nil, nil, v.rev, func(key, value []byte, m revision.Meta) bool {
		ferr = fn(key, value, m)
		return ferr == nil
	})
	return errors.Join(err, ferr)
}

// Scan calls fn for the applied keys k with start <= k < end, in key order,
// from one point-in-time view of the applied state, and returns the
// applied index and store revision of that view: the state fn saw is
// exactly the state as of that index. An empty start is the first key and
// an empty end no upper bound. key and value are valid only during the
// call; fn returns false to stop the walk. A deleted key is not in the
// state at all.
func (s *Store) Scan(start, end []byte, fn func(key, value []byte, m revision.Meta) bool) (applied, rev uint64, err error) {
	v := s.readView()
	defer v.close()
	return v.applied, v.rev, rangeIndex(v.tree, v.snap, v.gen, start, end, v.rev, fn)
}

// GetMany calls fn for each key, in order, with its value and revision
// metadata from one point-in-time view (found false: the key is not in
// it), and returns the applied index and store revision of that view. value is valid only
// during the call.
func (s *Store) GetMany(keys [][]byte, fn func(i int, value []byte, m revision.Meta, found bool)) (applied, rev uint64, err error) {
	v := s.readView()
	defer v.close()
	for i, k := range keys {
		found, err := v.get(k, v.rev, func(value []byte, m revision.Meta) { fn(i, value, m, true) })
		if err != nil {
			return 0, 0, err
		}
		if !found {
			fn(i, nil, revision.Meta{}, false)
		}
	}
	return v.applied, v.rev, nil
}

// RangeAt calls fn for the keys k with start <= k < end as they were at
// store revision rev (0: the latest committed one), in key order, with
// their value and Meta, and returns the revision it read at. An empty
// start is the first key and an empty end no upper bound. The answer
// comes from one point-in-time view. It fails with errs.ErrCompacted if
// rev is below the compaction revision (the compaction revision itself
// is readable) and with errs.ErrFutureRevision if rev is above the store
// revision. key and value are valid only during the call; fn returns
// false to stop the walk.
func (s *Store) RangeAt(start, end []byte, rev uint64, fn func(key, value []byte, m revision.Meta) bool) (atRev uint64, err error) {
	v := s.readView()
	defer v.close()
	if atRev, err = checkRev(rev, v.rev, v.compact); err != nil {
		return 0, err
	}
	return atRev, rangeIndex(v.tree, v.snap, v.gen, start, end, atRev, fn)
}
