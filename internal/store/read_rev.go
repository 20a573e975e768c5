package store

import (
	"bytes"
	"encoding/binary"
	"errors"
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
	return atRev, rangeAt(snap, gen, start, end, atRev, fn)
}

// rangeAt walks the keys k with start <= k < end at revision rev of
// generation gen's history, as r holds it.
func rangeAt(r pebble.Reader, gen uint64, start, end []byte, rev uint64, fn func(key, value []byte, m revision.Meta) bool) error {
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return nil // an empty range (Pebble wants its bounds in order)
	}
	opts := pebble.IterOptions{LowerBound: appendHistPrefix(nil, gen, start)}
	if len(end) > 0 {
		opts.UpperBound = appendHistPrefix(nil, gen, end)
	} else {
		opts.UpperBound = appendRevKey(nil, gen, revHistory+1)
	}
	it, err := r.NewIter(&opts)
	if err != nil {
		return err
	}
	defer it.Close()
	return walkAt(it, r, gen, rev, fn)
}

// revView opens a point-in-time view of the current generation.
func (s *Store) revView() (*pebble.Snapshot, uint64) {
	s.genMu.RLock()
	defer s.genMu.RUnlock()
	return s.db.NewSnapshot(), s.gen
}

// walkAt calls fn with each key's newest write at or below rev, in key
// order, leaving out tombstones: it walks the index (it) and reads each
// write it reports from r. Per key it costs one seek past the index
// entries newer than rev, one past the older ones when there are any,
// and one point read.
func walkAt(it *pebble.Iterator, r pebble.Reader, gen, rev uint64, fn func(key, value []byte, m revision.Meta) bool) error {
	var seek, key, ok []byte
	valid := it.First()
	for valid {
		k := it.Key()
		esc, at, wellFormed := splitHistKey(k[revKeyHeader+1:])
		if !wellFormed {
			return fmt.Errorf("%w: history key %x", ErrCorrupt, k)
		}
		group := k[:len(k)-8] // prefix + esc + terminator
		if at > rev {
			seek = binary.BigEndian.AppendUint64(append(seek[:0], group...), ^rev)
			valid = it.SeekGE(seek)
			continue
		}
		seq, deleted, err := decodeIndexValue(it.Value())
		if err != nil {
			return err
		}
		if !deleted {
			if key, wellFormed = unescape(key[:0], esc); !wellFormed {
				return fmt.Errorf("%w: history key %x", ErrCorrupt, k)
			}
			ok = appendOrderKey(ok[:0], gen, at, seq, key)
			more, err := readWrite(r, ok, func(m revision.Meta, v []byte) bool { return fn(key, v, m) })
			if err != nil || !more {
				return errors.Join(err, it.Error())
			}
		}
		// The next entry is usually the next key's; seek only when this
		// key has older entries.
		seek = append(seek[:0], group...)
		if valid = it.Next(); valid && bytes.HasPrefix(it.Key(), seek) {
			seek[len(seek)-1] = escAfter
			valid = it.SeekGE(seek)
		}
	}
	return it.Error()
}

// readWrite reads the by-revision record ok that an index entry names (a
// put, not a tombstone) and calls fn with its Meta and value, which are
// valid only during the call; more is fn's answer.
func readWrite(r pebble.Reader, ok []byte, fn func(m revision.Meta, value []byte) bool) (more bool, err error) {
	raw, c, err := r.Get(ok)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return false, fmt.Errorf("%w: no history record %x for its index entry", ErrCorrupt, ok)
	case err != nil:
		return false, err
	}
	defer c.Close()
	m, v, deleted, err := decodeHistValue(raw)
	if err != nil {
		return false, err
	}
	if deleted {
		return false, fmt.Errorf("%w: history record %x is a tombstone, its index entry a put", ErrCorrupt, ok)
	}
	return fn(m, v), nil
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
	var hk, pk []byte
	for ok := wit.First(); ok; ok = wit.Next() {
		rev, _, key, valid := splitOrderKey(wit.Key()[revKeyHeader+1:])
		if !valid {
			return 0, fmt.Errorf("%w: history key %x", ErrCorrupt, wit.Key())
		}
		var ev Change
		if ev.Meta, ev.Value, ev.Deleted, err = decodeHistValue(wit.Value()); err != nil {
			return 0, err
		}
		if ev.Deleted {
			ev.Value = nil
		}
		ev.Key = key
		hk = appendHistKey(hk[:0], gen, key, rev)
		more, err := withPrev(snap, hit, gen, hk, &pk, ev, fn)
		if err != nil {
			return 0, err
		}
		if !more {
			break
		}
	}
	return cur, wit.Error()
}

// withPrev completes ev with the key's write before it, found through the
// index (hk is ev's own index entry, the next one in key order is the
// previous write's: revisions are inverted), and calls fn with it.
func withPrev(r pebble.Reader, hit *pebble.Iterator, gen uint64, hk []byte, pk *[]byte, ev Change, fn func(ev Change) bool) (bool, error) {
	if !hit.SeekGE(hk) || !bytes.Equal(hit.Key(), hk) {
		return false, errors.Join(hit.Error(), fmt.Errorf("%w: no index entry %x for its history record", ErrCorrupt, hk))
	}
	group := hk[:len(hk)-8]
	if !hit.Next() || !bytes.HasPrefix(hit.Key(), group) {
		return fn(ev), hit.Error() // the key's first write since it was compacted
	}
	_, prev, valid := splitHistKey(hit.Key()[revKeyHeader+1:])
	seq, deleted, err := decodeIndexValue(hit.Value())
	switch {
	case !valid:
		return false, fmt.Errorf("%w: history key %x", ErrCorrupt, hit.Key())
	case err != nil:
		return false, err
	case deleted:
		return fn(ev), nil
	}
	*pk = appendOrderKey((*pk)[:0], gen, prev, seq, ev.Key)
	return readWrite(r, *pk, func(m revision.Meta, v []byte) bool {
		ev.PrevValue, ev.PrevMeta, ev.HasPrev = v, m, true
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
	return atRev, rangeAt(b, u.gen, start, end, atRev, fn)
}
