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
