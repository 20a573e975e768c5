package store

import (
	"bytes"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
)

// Compaction has two halves. The logical one is Update.Compact, applied
// from a raft entry: it sets the compaction revision in the Update's
// batch, so every member compacts at the same point of the log, and from
// then on reads below it fail with errs.ErrCompacted. The physical one
// deletes the history no read may ask for any more, in the background,
// in batches of at most limits.CompactBatch records, each batch its own
// small Pebble commit (with its cursor), so that it never holds up the
// apply path however much history a compaction releases. How far it has
// got differs from member to member; what reads see does not: at
// compaction revision C it deletes, for each key, the records older than
// the key's newest at or below C, and that one too if it is a tombstone,
// and the revision-order records at or below C. A read at R >= C finds
// the same newest record at or below R before and after (a deleted
// tombstone and no record are both "absent"), and a change above C finds
// the same previous record; readers work on Pebble snapshots, which a
// batch never changes under them.

// Compact sets the compaction revision to rev, in the Update's batch. It
// refuses a rev above the store revision (errs.ErrFutureRevision) and one
// at or below the current compaction revision (errs.ErrCompacted), as
// etcd does.
func (u *Update) Compact(rev uint64) error {
	r := u.revs()
	switch {
	case rev > r.rev:
		return fmt.Errorf("%w: compact to %d, current %d", errs.ErrFutureRevision, rev, r.rev)
	case rev <= r.compact:
		return fmt.Errorf("%w: compact to %d, compacted at %d", errs.ErrCompacted, rev, r.compact)
	}
	r.compact, r.dirty = rev, true
	r.kbuf = appendRevKey(r.kbuf[:0], u.gen, revCompact)
	return u.b.Set(r.kbuf, encodeU64(rev), nil)
}

// compactor runs the physical deletion: one goroutine per store, woken
// when the compaction revision moves or a snapshot is installed.
type compactor struct {
	mu   sync.Mutex // serializes batches: the goroutine's and drain's
	s    *Store
	log  *limitedLog
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func (s *Store) startCompactor(log *limitedLog) {
	c := &compactor{s: s, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.rs.comp = c
	c.kick() // a compaction cut short by a restart goes on
	go c.run()
}

// kick wakes the compactor; it never blocks.
func (c *compactor) kick() {
	if c == nil {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// close stops the compactor and waits for it (Close, before the database
// closes). A batch in flight finishes first.
func (c *compactor) close() {
	if c == nil {
		return
	}
	close(c.stop)
	<-c.done
}

func (c *compactor) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		for {
			more, err := c.step()
			if err != nil {
				if c.s.fault.tripped() {
					return // the store writes nothing more (fault.go)
				}
				c.log.log(slog.LevelError, "history compaction failed; it resumes at the next compaction", "err", err)
				break
			}
			if !more {
				break
			}
			select {
			case <-c.stop:
				return
			default:
			}
		}
	}
}

// step runs one batch.
func (c *compactor) step() (more bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s.compactBatch(limits.CompactBatch)
}

// drain runs batches until the history below the compaction revision is
// gone: what the goroutine does, for tests and benchmarks that need it
// done at a known point.
func (c *compactor) drain() error {
	for {
		more, err := c.step()
		if err != nil || !more {
			return err
		}
	}
}

// compactBatch deletes the history below the compaction revision that the
// next at most n revision-order records name, and records how far it
// got; more reports whether any may remain. It holds genMu's read side so
// that a snapshot install (which drops the generation) waits for it
// rather than have it write into a dropped generation.
func (s *Store) compactBatch(n int) (more bool, err error) {
	s.genMu.RLock()
	defer s.genMu.RUnlock()
	gen := s.gen
	_, compact, err := loadRevs(s.getRaw, gen)
	if err != nil || compact == 0 {
		return false, err
	}
	cursorKey := appendRevKey(nil, gen, revCursor)
	cursor, _, err := s.getRaw(cursorKey)
	if err != nil {
		return false, err
	}
	orderPrefix := appendRevKey(nil, gen, revOrder)
	wit, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: append(bytes.Clone(orderPrefix), cursor...),
		UpperBound: appendU64BE(bytes.Clone(orderPrefix), compact+1), // revisions <= compact
	})
	if err != nil {
		return false, err
	}
	defer wit.Close()
	hit, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: appendRevKey(nil, gen, revHistory), UpperBound: appendRevKey(nil, gen, revHistory+1)})
	if err != nil {
		return false, err
	}
	defer hit.Close()
	b := s.db.NewBatch()
	defer func() {
		if b != nil {
			b.Close()
		}
	}()
	var start uint64 // the revision this pass began at (0: the first pass)
	if len(cursor) >= 8 {
		start = beU64(cursor)
	}
	ok, examined := wit.First(), 0
	for ; ok && examined < n; ok, examined = wit.Next(), examined+1 {
		if err := compactRecord(b, hit, gen, start, compact, wit.Key()); err != nil {
			return false, err
		}
	}
	if err := wit.Error(); err != nil {
		return false, err
	}
	if examined == 0 {
		return false, nil
	}
	next := appendU64BE(nil, compact+1) // done: resume above compact
	if ok {
		next = bytes.Clone(wit.Key()[len(orderPrefix):])
	}
	if err := b.Set(cursorKey, next, nil); err != nil {
		return false, err
	}
	err, finished := s.guard(func() error { return b.Commit(pebble.NoSync) })
	if !finished {
		b = nil // abandoned inside Pebble (fault.go)
	}
	return ok && err == nil, err
}

// compactRecord adds to b the deletions one revision-order record wk (at
// or below compact) calls for: itself; the key's records older than
// start, the revision this pass of the compactor began at (what earlier
// compactions kept of the key: wk's write supersedes it); and wk's
// history record unless that is the key's newest at or below compact and
// not a tombstone. (Older records from start on have revision-order
// records of their own, met earlier in this pass.)
func compactRecord(b *pebble.Batch, hit *pebble.Iterator, gen, start, compact uint64, wk []byte) error {
	rev, _, key, ok := splitOrderKey(wk[revKeyHeader+1:])
	if !ok {
		return fmt.Errorf("%w: revision-order key %x", ErrCorrupt, wk)
	}
	if err := b.Delete(wk, nil); err != nil {
		return err
	}
	hk := appendHistKey(nil, gen, key, rev)
	group := hk[:len(hk)-8]
	if start > 0 && rev >= start {
		for ok := hit.SeekGE(appendHistKey(nil, gen, key, start-1)); ok && bytes.HasPrefix(hit.Key(), group); ok = hit.Next() {
			if err := b.Delete(hit.Key(), nil); err != nil {
				return err
			}
		}
	}
	// The key's newest record at or below compact: the first at or after
	// its key at compact (revisions are inverted).
	if hit.SeekGE(appendHistKey(nil, gen, key, compact)) && bytes.Equal(hit.Key(), hk) {
		_, _, deleted, err := decodeHistValue(hit.Value())
		if err != nil || !deleted {
			return err // the key's state at compact: kept
		}
	}
	if err := hit.Error(); err != nil {
		return err
	}
	return b.Delete(hk, nil)
}
