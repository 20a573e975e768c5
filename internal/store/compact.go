package store

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/btree"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
)

// Compaction has two halves. The logical one is Update.Compact, applied
// from a raft entry: it sets the compaction revision in the Update's
// batch, so every member compacts at the same point of the log, and from
// then on reads below it fail with errs.ErrCompacted. The physical one
// deletes the history no read may ask for any more, in the background,
// in batches of at most limits.CompactBatch records, each batch its own
// small Pebble commit, so that it never holds up the apply path however
// much history a compaction releases. How far it has got differs from
// member to member; what reads see does not.
//
// A pass at compaction revision C walks the key index in key order and
// deletes, for each key, the writes older than the key's newest at or
// below C, and that one too if it is a tombstone, oldest first: their
// by-revision records in one Pebble batch, then, once that committed,
// their entries in the index. A read at R >= C finds the same newest
// write at or below R before, during and after the pass, and a change
// above C the same previous write. A pass to C starts only once every
// view (readView) taken before C was published has closed: such a view
// may read below C. Nothing of a pass is durable but its deletions:
// after a restart the index is built from what is left, and the pass
// begins again.

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

// compactPause separates the compactor's batches, so that a long
// compaction takes a share of the disk and the CPU beside the writes, not
// all it can get (etcd pauses as long between its batches of 1000).
const compactPause = 10 * time.Millisecond

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
			case <-time.After(compactPause):
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

// compactCursor is how far the pass has got: the compaction revision it
// works to, in which generation, and the key to go on at (done: the
// pass is over).
type compactCursor struct {
	gen, pass uint64
	resume    []byte
	done      bool
}

// compactBatch runs one batch of the pass to the published compaction
// revision: it deletes at most n history records that no read may ask
// for, and reports whether the pass goes on. A pass to a newer compaction
// revision begins once the last one is done (its deletions are right for
// the newer one too). It holds genMu's read side so that a snapshot
// install (which drops the generation) waits for it rather than have it
// write into a dropped generation.
func (s *Store) compactBatch(n int) (more bool, err error) {
	s.genMu.RLock()
	defer s.genMu.RUnlock()
	compact := s.rs.compact.Load()
	cur := &s.rs.cur
	switch {
	case compact == 0:
		return false, nil
	case cur.gen != s.gen || (cur.done && cur.pass < compact):
		*cur = compactCursor{gen: s.gen, pass: compact}
	case cur.done:
		return false, nil
	}
	if s.views.below(cur.pass) {
		return true, nil // a view may read what the pass would drop: later
	}
	b := s.db.NewBatch()
	defer func() {
		if b != nil {
			b.Close()
		}
	}()
	drops, next, done := compactKeys(s.ix.clone(), b, s.gen, cur.pass, cur.resume, n)
	err, finished := s.guard(func() error { return b.Commit(pebble.NoSync) })
	if !finished {
		b = nil // abandoned inside Pebble (fault.go)
	}
	if err != nil {
		return false, err
	}
	for _, d := range drops {
		s.ix.drop(d.key, d.upTo)
	}
	cur.resume, cur.done = next, done
	return !done || cur.pass < compact, nil
}

// compactLooks is how many keys a batch may look at per record it may
// delete: a pass over many keys with little to delete goes at a few
// hundred thousand keys a batch, not a thousand.
const compactLooks = 64

// compactDrop is a key's writes a batch deleted: those at or below upTo.
type compactDrop struct {
	key  []byte
	upTo uint64
}

// compactKeys adds to b the deletions of up to n history records of the
// keys of t from resume on: for each key, the writes older than its
// newest at or below pass, and that one too if it is a tombstone, oldest
// first. It returns what it deleted, and where the next batch goes on.
func compactKeys(t *btree.BTreeG[*ixKey], b *pebble.Batch, gen, pass uint64, resume []byte, n int) (drops []compactDrop, next []byte, done bool) {
	var ok []byte
	used, looked := 0, 0
	done = true
	ascend(t, resume, nil, func(e *ixKey) bool {
		if used >= n || looked >= compactLooks*n {
			next, done = e.key, false
			return false
		}
		revs := e.state().revs
		keep := -1 // the newest at or below pass
		for i, r := range revs {
			if r.mod > pass {
				break
			}
			keep = i
		}
		upTo := keep // delete revs[:upTo]
		if keep >= 0 && revs[keep].deleted {
			upTo = keep + 1
		}
		all := upTo
		upTo = min(upTo, n-used)
		for _, r := range revs[:max(upTo, 0)] {
			ok = appendOrderKey(ok[:0], gen, r.mod, r.seq, e.key)
			_ = b.Delete(ok, nil) // a batch's Delete fails only when closed
		}
		if upTo > 0 {
			used += upTo
			drops = append(drops, compactDrop{key: e.key, upTo: revs[upTo-1].mod})
		}
		looked++
		if upTo < all {
			next, done = e.key, false // the key's older writes are gone; the rest next time
			return false
		}
		return true
	})
	return drops, next, done
}
