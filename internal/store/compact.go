package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
// got differs from member to member; what reads see does not. A pass at
// compaction revision C walks the history in key order and deletes, for
// each key, the records older than the key's newest at or below C, and
// that one too if it is a tombstone, oldest first: each with its index
// entry and its by-revision record (history.go), in one batch. A read
// at R >= C finds the same newest record at or below R before, during
// and after the pass (a tombstone is deleted last, so it hides the older
// records until they are gone; a deleted tombstone and no record are
// both "absent"), and a change above C finds the same previous record.
// The by-revision records of the writes kept (each key's newest at or
// below C) stay: they hold those writes' values.
// Readers work on Pebble snapshots, which a batch never changes under
// them.

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

// The compactor's cursor ('d' record) says how far its pass over the
// history, in key order, has got: le64(pass) + state + resume, where pass
// is the compaction revision the pass works to, and resume a history key
// (after its kind byte): for cursorGroup the prefix of the key group to
// begin at, for cursorInGroup the record to go on deleting from (the
// group's kept record was decided by an earlier batch), and nothing for
// cursorDone. A pass in key order reads the history sequentially, as
// Pebble stores it; one in revision order read it at random, 20,000
// records a second.
const (
	cursorGroup   = 0
	cursorInGroup = 1
	cursorDone    = 2
)

type compactCursor struct {
	pass   uint64
	state  byte
	resume []byte
}

func (c compactCursor) encode() []byte {
	return append(append(encodeU64(c.pass), c.state), c.resume...)
}

func decodeCursor(raw []byte) (compactCursor, bool) {
	if len(raw) < 9 || raw[8] > cursorDone || (raw[8] == cursorDone) != (len(raw) == 9) {
		return compactCursor{}, false
	}
	return compactCursor{pass: binary.LittleEndian.Uint64(raw), state: raw[8], resume: raw[9:]}, true
}

// compactBatch runs one batch of the pass to the compaction revision: it
// examines at most n history records, deletes those no read may ask for,
// and records how far it got; more reports whether the pass goes on. A
// pass to a new compaction revision starts from the first key, dropping
// It holds genMu's read side so
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
	raw, ok, err := s.getRaw(cursorKey)
	if err != nil {
		return false, err
	}
	cur, valid := decodeCursor(raw)
	if ok && !valid {
		return false, fmt.Errorf("%w: compaction cursor %x", ErrCorrupt, raw)
	}
	b := s.db.NewBatch()
	defer func() {
		if b != nil {
			b.Close()
		}
	}()
	if cur.pass < compact && (cur.state == cursorDone || !ok) {
		// A pass to a newer compaction revision begins once the last one
		// is done (its deletions are right for the newer one too).
		cur = compactCursor{pass: compact}
	}
	if cur.state == cursorDone && cur.pass == compact {
		return false, nil
	}
	if cur, err = s.compactKeys(b, gen, cur, n); err != nil {
		return false, err
	}
	if err := b.Set(cursorKey, cur.encode(), nil); err != nil {
		return false, err
	}
	err, finished := s.guard(func() error { return b.Commit(pebble.NoSync) })
	if !finished {
		b = nil // abandoned inside Pebble (fault.go)
	}
	return (cur.state != cursorDone || cur.pass < compact) && err == nil, err
}

// compactKeys adds to b the deletions of up to n history records from cur
// on: for each key, the records older than its newest at or below
// cur.pass, and that one too if it is a tombstone. It returns where the
// next batch resumes.
func (s *Store) compactKeys(b *pebble.Batch, gen uint64, cur compactCursor, n int) (compactCursor, error) {
	prefix := appendRevKey(nil, gen, revHistory)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: appendRevKey(nil, gen, revHistory+1)})
	if err != nil {
		return cur, err
	}
	defer it.Close()
	at := append(bytes.Clone(prefix), cur.resume...)
	var from []byte // inside a group: the record to go on at
	if cur.state == cursorInGroup {
		from = at
	}
	ok := it.SeekGE(at)
	for used := 0; ok && used < n; from = nil {
		k := it.Key()
		esc, _, valid := splitHistKey(k[len(prefix):])
		if !valid {
			return cur, fmt.Errorf("%w: history key %x", ErrCorrupt, k)
		}
		key, valid := unescape(nil, esc)
		if !valid {
			return cur, fmt.Errorf("%w: history key %x", ErrCorrupt, k)
		}
		group := bytes.Clone(k[:len(k)-8])
		g := compactGroup{b: b, it: it, gen: gen, key: key, group: group}
		resume, spent, err := g.run(cur.pass, from, n-used)
		if err != nil {
			return cur, err
		}
		if resume != nil {
			return compactCursor{pass: cur.pass, state: cursorInGroup, resume: resume[len(prefix):]}, nil
		}
		used += spent
		group[len(group)-1] = escAfter // above every record of the key
		ok = it.SeekGE(group)
	}
	if ok {
		return compactCursor{pass: cur.pass, state: cursorGroup, resume: bytes.Clone(it.Key()[len(prefix):])}, nil
	}
	return compactCursor{pass: cur.pass, state: cursorDone}, it.Error()
}

// compactGroup is the compaction of one key's history: its index
// entries are the group (the escaped key's prefix) in it.
type compactGroup struct {
	b     *pebble.Batch
	it    *pebble.Iterator
	gen   uint64
	key   []byte
	group []byte
	ok    []byte // by-revision key buffer
}

// run adds to b the deletions of the key's writes that no read may ask
// for, from the oldest up (from from, if set), at most budget of them;
// resume is the index entry to go on at if the budget ran out. Oldest
// first, so that a tombstone, deleted last, hides the older writes from
// readers of the batches in between. spent counts the deletions and the
// key's seek.
func (g *compactGroup) run(pass uint64, from []byte, budget int) (resume []byte, spent int, err error) {
	it, group := g.it, g.group
	// The key's newest write at or below pass (revisions are inverted).
	if !it.SeekGE(binary.BigEndian.AppendUint64(bytes.Clone(group), ^pass)) || !bytes.HasPrefix(it.Key(), group) {
		return nil, 1, it.Error() // every write of the key is above pass
	}
	keep := bytes.Clone(it.Key())
	_, tomb, err := decodeIndexValue(it.Value())
	if err != nil {
		return nil, 0, err
	}
	var ok bool
	if from != nil {
		ok = it.SeekGE(from)
	} else {
		after := bytes.Clone(group)
		after[len(after)-1] = escAfter
		ok = it.SeekLT(after) // the key's oldest write
	}
	for ; ok && bytes.HasPrefix(it.Key(), group) && bytes.Compare(it.Key(), keep) >= 0; ok = it.Prev() {
		last := bytes.Equal(it.Key(), keep)
		if last && !tomb {
			break // the key's state at pass: kept
		}
		if spent == budget {
			return bytes.Clone(it.Key()), spent, nil
		}
		if err := g.delete(); err != nil {
			return nil, 0, err
		}
		spent++
		if last {
			break
		}
	}
	return nil, spent + 1, it.Error()
}

// delete adds to b the deletion of the write whose index entry the
// iterator is at: the entry and its by-revision record.
func (g *compactGroup) delete() error {
	k := g.it.Key()
	seq, _, err := decodeIndexValue(g.it.Value())
	if err != nil {
		return err
	}
	rev := ^binary.BigEndian.Uint64(k[len(k)-8:])
	g.ok = appendOrderKey(g.ok[:0], g.gen, rev, seq, g.key)
	return errors.Join(g.b.Delete(k, nil), g.b.Delete(g.ok, nil))
}
