package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/revision"
)

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
	snap, gen := s.revView()
	defer snap.Close()
	cur, compact, err := revsAt(snap, gen)
	if err != nil {
		return 0, err
	}
	if atRev, err = checkRev(rev, cur, compact); err != nil {
		return 0, err
	}
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return atRev, nil // an empty range (Pebble wants its bounds in order)
	}
	opts := pebble.IterOptions{LowerBound: appendHistPrefix(nil, gen, start)}
	if len(end) > 0 {
		opts.UpperBound = appendHistPrefix(nil, gen, end)
	} else {
		opts.UpperBound = appendRevKey(nil, gen, revHistory+1)
	}
	it, err := snap.NewIter(&opts)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	return atRev, walkAt(it, atRev, fn)
}

// revView opens a point-in-time view of the current generation.
func (s *Store) revView() (*pebble.Snapshot, uint64) {
	s.genMu.RLock()
	defer s.genMu.RUnlock()
	return s.db.NewSnapshot(), s.gen
}

// walkAt calls fn with each key's newest record at or below rev, in key
// order, leaving out tombstones. Per key it costs one seek past the
// records newer than rev, and one past the older ones when there are any.
func walkAt(it *pebble.Iterator, rev uint64, fn func(key, value []byte, m revision.Meta) bool) error {
	var seek, key []byte
	ok := it.First()
	for ok {
		k := it.Key()
		esc, r, valid := splitHistKey(k[revKeyHeader+1:])
		if !valid {
			return fmt.Errorf("%w: history key %x", ErrCorrupt, k)
		}
		group := k[:len(k)-8] // prefix + esc + terminator
		if r > rev {
			seek = binary.BigEndian.AppendUint64(append(seek[:0], group...), ^rev)
			ok = it.SeekGE(seek)
			continue
		}
		m, v, deleted, err := decodeHistValue(it.Value())
		if err != nil {
			return err
		}
		if !deleted {
			if key, valid = unescape(key[:0], esc); !valid {
				return fmt.Errorf("%w: history key %x", ErrCorrupt, k)
			}
			if !fn(key, v, m) {
				return it.Error()
			}
		}
		// The next record is usually the next key's; seek only when this
		// key has older records.
		seek = append(seek[:0], group...)
		if ok = it.Next(); ok && bytes.HasPrefix(it.Key(), seek) {
			seek[len(seek)-1] = escAfter
			ok = it.SeekGE(seek)
		}
	}
	return it.Error()
}

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
	snap, gen := s.revView()
	defer snap.Close()
	cur, compact, err := revsAt(snap, gen)
	if err != nil {
		return 0, err
	}
	if compact > 0 && from <= compact {
		return 0, fmt.Errorf("%w: changes from revision %d, compacted at %d", errs.ErrCompacted, from, compact)
	}
	lo := binary.BigEndian.AppendUint64(appendRevKey(nil, gen, revOrder), from)
	wit, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: appendRevKey(nil, gen, revOrder+1)})
	if err != nil {
		return 0, err
	}
	defer wit.Close()
	hit, err := snap.NewIter(&pebble.IterOptions{
		LowerBound: appendRevKey(nil, gen, revHistory), UpperBound: appendRevKey(nil, gen, revHistory+1)})
	if err != nil {
		return 0, err
	}
	defer hit.Close()
	var hk, vbuf []byte
	for ok := wit.First(); ok; ok = wit.Next() {
		rev, _, key, valid := splitOrderKey(wit.Key()[revKeyHeader+1:])
		if !valid {
			return 0, fmt.Errorf("%w: revision-order key %x", ErrCorrupt, wit.Key())
		}
		hk = appendHistKey(hk[:0], gen, key, rev)
		ev, err := changeAt(hit, hk, &vbuf)
		if err != nil {
			return 0, err
		}
		ev.Key = key
		if !fn(ev) {
			break
		}
	}
	return cur, wit.Error()
}

// changeAt reads the history record hk and the one before it of the same
// key (the next in key order: revisions are inverted). The value is
// copied to *buf: the iterator moves on to the previous record.
func changeAt(hit *pebble.Iterator, hk []byte, buf *[]byte) (Change, error) {
	if !hit.SeekGE(hk) || !bytes.Equal(hit.Key(), hk) {
		return Change{}, fmt.Errorf("%w: no history record %x for its revision-order record", ErrCorrupt, hk)
	}
	var ev Change
	var err error
	if ev.Meta, ev.Value, ev.Deleted, err = decodeHistValue(hit.Value()); err != nil {
		return Change{}, err
	}
	if ev.Deleted {
		ev.Value = nil
	} else {
		*buf = append((*buf)[:0], ev.Value...)
		ev.Value = *buf
	}
	if hit.Next() && bytes.HasPrefix(hit.Key(), hk[:len(hk)-8]) {
		m, v, deleted, err := decodeHistValue(hit.Value())
		if err != nil {
			return Change{}, err
		}
		if !deleted {
			ev.PrevValue, ev.PrevMeta, ev.HasPrev = v, m, true
		}
	}
	return ev, hit.Error()
}
