package store

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Formats 2 and 3 kept each write's value in its by-key history record
// and nothing in its by-revision record; format 4 keeps the value in the
// by-revision record and makes the by-key record an index entry naming it
// (history.go). migrateHistory rewrites the current generation's history
// so, in batches of at most migrateBatch writes; the caller records
// format 4 (synced) once it has returned. A migration cut short by a
// crash is begun again at the next Open: it skips what it finds already
// rewritten (a by-revision record with a value, an index entry of
// indexSize bytes), so every batch stands alone. Other generations are
// strays that Open drops.
func (s *Store) migrateHistory() error {
	gen, err := s.loadU64(keyGen, 1)
	if err != nil {
		return err
	}
	m := &migration{s: s, gen: gen}
	// First the writes that have a by-revision record: it gives their
	// place in their revision. Then the writes kept at compaction, whose
	// by-revision record went with the compaction (formats 2 and 3 deleted
	// those at or below the compaction revision): the place 0 is theirs,
	// as nothing reads a compacted revision in revision order.
	if err := errors.Join(m.orderRecords(), m.flush()); err != nil {
		return err // flushed before the second pass reads what it wrote
	}
	if err := m.indexRecords(); err != nil {
		return err
	}
	return m.flush()
}

// migrateBatch is the most writes one batch of the migration rewrites.
const migrateBatch = 1000

type migration struct {
	s   *Store
	gen uint64
	b   *pebble.Batch
	n   int
	buf []byte
}

// set adds the rewritten records of one write to the batch in hand,
// committing it when full.
func (m *migration) set(orderKey, histKey, value []byte, seq uint32, deleted bool) error {
	if m.b == nil {
		m.b = m.s.db.NewBatch()
	}
	m.buf = appendIndexValue(m.buf[:0], seq, deleted)
	if err := errors.Join(m.b.Set(orderKey, value, nil), m.b.Set(histKey, m.buf, nil)); err != nil {
		return err
	}
	if m.n++; m.n >= migrateBatch {
		return m.flush()
	}
	return nil
}

// flush commits the batch in hand (unsynced: the format record that ends
// the migration is synced, and Pebble's log keeps the order).
func (m *migration) flush() error {
	b := m.b
	m.b, m.n = nil, 0
	if b == nil {
		return nil
	}
	err, finished := m.s.guard(func() error { return b.Commit(pebble.NoSync) })
	if finished {
		b.Close()
	}
	return err
}

func (m *migration) iter(kind byte) (*pebble.Iterator, error) {
	return m.s.db.NewIter(&pebble.IterOptions{
		LowerBound: appendRevKey(nil, m.gen, kind), UpperBound: appendRevKey(nil, m.gen, kind+1)})
}

// orderRecords moves the value of every write that has a by-revision
// record from its by-key record into it.
func (m *migration) orderRecords() error {
	it, err := m.iter(revOrder)
	if err != nil {
		return err
	}
	defer it.Close()
	var hk []byte
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Value()) > 0 {
			continue // rewritten by a migration cut short
		}
		rev, seq, key, valid := splitOrderKey(it.Key()[revKeyHeader+1:])
		if !valid {
			return fmt.Errorf("%w: revision-order key %x", ErrCorrupt, it.Key())
		}
		hk = appendHistKey(hk[:0], m.gen, key, rev)
		raw, found, err := m.s.getRaw(hk)
		switch {
		case err != nil:
			return err
		case !found:
			return fmt.Errorf("%w: no history record %x for its revision-order record", ErrCorrupt, hk)
		}
		_, _, deleted, err := decodeHistValue(raw)
		if err != nil {
			return err
		}
		if err := m.set(it.Key(), hk, raw, seq, deleted); err != nil {
			return err
		}
	}
	return it.Error()
}

// indexRecords gives the writes left with their value in their by-key
// record (those without a by-revision record) one, at place 0.
func (m *migration) indexRecords() error {
	it, err := m.iter(revHistory)
	if err != nil {
		return err
	}
	defer it.Close()
	var key, ok []byte
	for valid := it.First(); valid; valid = it.Next() {
		if len(it.Value()) == indexSize {
			continue // an index entry already
		}
		esc, rev, wellFormed := splitHistKey(it.Key()[revKeyHeader+1:])
		if wellFormed {
			key, wellFormed = unescape(key[:0], esc)
		}
		if !wellFormed {
			return fmt.Errorf("%w: history key %x", ErrCorrupt, it.Key())
		}
		_, _, deleted, err := decodeHistValue(it.Value())
		if err != nil {
			return err
		}
		ok = appendOrderKey(ok[:0], m.gen, rev, 0, key)
		if err := m.set(ok, it.Key(), it.Value(), 0, deleted); err != nil {
			return err
		}
	}
	return it.Error()
}

// migrateToIndex drops the records formats 4 to 6 kept by key (each
// key's state, the history's index entries) and the compactor's cursor,
// and records DataFormat, in one synced batch. The history's by-revision
// records, which stay, hold every key's state: before dropping anything
// it checks that every state record has its write there, with the same
// Meta, and that nothing else is live there, and refuses (ErrCorrupt)
// otherwise, touching nothing.
func (s *Store) migrateToIndex() error {
	gen, err := s.loadU64(keyGen, 1)
	if err != nil {
		return err
	}
	if err := s.checkStateInHistory(gen); err != nil {
		return err
	}
	return s.dropByKey(gen)
}

// dropByKey deletes the records kept by key and the compactor's cursor,
// and records DataFormat, in one synced batch.
func (s *Store) dropByKey(gen uint64) error {
	b := s.db.NewBatch()
	err := errors.Join(
		b.DeleteRange(kvStart, kvEnd, nil),
		b.DeleteRange(appendRevKey(nil, gen, revHistory), appendRevKey(nil, gen, revHistory+1), nil),
		b.Delete(appendRevKey(nil, gen, revCursor), nil),
		b.Set(keyFormat, encodeU64(DataFormat), nil),
	)
	if err != nil {
		b.Close()
		return err
	}
	return s.commitSynced(b)
}

// checkStateInHistory checks that the history of generation gen holds
// exactly the state its by-key records hold.
func (s *Store) checkStateInHistory(gen uint64) error {
	x, err := buildIndex(s.db, gen)
	if err != nil {
		return err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: genPrefix(gen), UpperBound: genEnd(gen)})
	if err != nil {
		return err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()[kvKeyHeader:]
		m, _, err := SplitValue(it.Value())
		if err != nil {
			return err
		}
		var r ixRev
		var ok bool
		st := x.get(key)
		if st != nil {
			r, ok = latest(st.revs)
		}
		if !ok || r.deleted || st.last != m {
			return fmt.Errorf("%w: key %q of the state has no matching write in the history", ErrCorrupt, key)
		}
		n++
	}
	if err := it.Error(); err != nil {
		return err
	}
	if n == 0 && !s.holdsHistoryIndex(gen) {
		return nil // none of either kind: dropped by a migration already
	}
	live := 0
	x.tree.Ascend(func(e *ixKey) bool {
		if r, ok := latest(e.state().revs); ok && !r.deleted {
			live++
		}
		return true
	})
	if live != n {
		return fmt.Errorf("%w: the history holds %d live keys, the state %d", ErrCorrupt, live, n)
	}
	return nil
}

// holdsHistoryIndex reports whether generation gen has history index
// entries (formats 4 to 6 keep one per write).
func (s *Store) holdsHistoryIndex(gen uint64) bool {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: appendRevKey(nil, gen, revHistory), UpperBound: appendRevKey(nil, gen, revHistory+1)})
	if err != nil {
		return true
	}
	defer it.Close()
	return it.First()
}
