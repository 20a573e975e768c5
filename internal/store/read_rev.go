package store

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/revision"
)

// Change is one write as Changes reports it.
type Change struct {
	Key   []byte
	Value []byte // nil for a delete
	// Meta is the key's after the write; Meta.Mod is the write's revision
	// (a delete's tombstone has the Meta its writer recorded).
	Meta    revision.Meta
	Deleted bool
	// PrevValue and PrevMeta are the key's before the write, if HasPrev:
	// etcd's prev_kv. A key that did not exist has none.
	PrevValue []byte
	PrevMeta  revision.Meta
	HasPrev   bool
}

// Changes calls fn with every write of revision from or later, in
// revision order (a revision's writes in the order they were recorded),
// from one point-in-time view, and returns the store revision of that
// view: the changes up to it are complete. It fails with
// errs.ErrCompacted if from is at or below the compaction revision
// (a watch from revision r needs r above it, as etcd's does). A from
// above the store revision yields nothing. The Change's slices are valid
// only during the call; fn returns false to stop.
func (s *Store) Changes(from uint64, fn func(ev Change) bool) (atRev uint64, err error) {
	v := s.readView()
	defer v.close()
	if v.compact > 0 && from <= v.compact {
		return 0, fmt.Errorf("%w: changes from revision %d, compacted at %d", errs.ErrCompacted, from, v.compact)
	}
	if from > v.rev {
		return v.rev, nil
	}
	lo := binary.BigEndian.AppendUint64(appendRevKey(nil, v.gen, revOrder), from)
	hi := binary.BigEndian.AppendUint64(appendRevKey(nil, v.gen, revOrder), v.rev+1)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		rev, _, key, valid := splitOrderKey(it.Key()[revKeyHeader+1:])
		if !valid {
			return 0, fmt.Errorf("%w: history key %x", ErrCorrupt, it.Key())
		}
		var ev Change
		if ev.Meta, ev.Value, ev.Deleted, err = decodeHistValue(it.Value()); err != nil {
			return 0, err
		}
		if ev.Deleted {
			ev.Value = nil
		}
		ev.Key = key
		more, err := v.withPrev(rev, ev, fn)
		if err != nil {
			return 0, err
		}
		if !more {
			break
		}
	}
	return v.rev, it.Error()
}

// withPrev completes ev, a write at rev, with the key's write before it
// (the newest below rev), and calls fn with it.
func (v *readView) withPrev(rev uint64, ev Change, fn func(ev Change) bool) (bool, error) {
	var prev ixRev
	var ok bool
	if e := find(v.tree, ev.Key); e != nil {
		prev, ok = at(e.state().revs, rev-1)
	}
	if !ok || prev.deleted {
		return fn(ev), nil // none, or compacted away: the key's first write since
	}
	return readValue(v.snap, v.gen, ev.Key, prev, &v.buf, func(value []byte, m revision.Meta) bool {
		ev.PrevValue, ev.PrevMeta, ev.HasPrev = value, m, true
		return fn(ev)
	})
}

// RangeAt is Store.RangeAt over the state as this Update sees it: its
// own earlier writes, store revision and compaction revision included
// (what a transaction applied in this Update reads at a past revision).
// It reads the history through the Update's batch, not a snapshot: the
// compactor deletes only records that no read at or above the
// compaction revision finds (compact.go), and the Update's compaction
// revision is at least the one the compactor works to, so the answer is
// the same on every member, however far its compactor has got.
func (u *Update) RangeAt(start, end []byte, rev uint64, fn func(key, value []byte, m revision.Meta) bool) (atRev uint64, err error) {
	r := u.revs()
	if atRev, err = checkRev(rev, r.rev, r.compact); err != nil {
		return 0, err
	}
	b, err := u.reader()
	if err != nil {
		return 0, err
	}
	return atRev, rangeIndex(u.ix.clone(), b, u.gen, start, end, atRev, fn)
}
