package watch

import (
	"errors"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// Store is the node's stored history of changes (internal/store's, through
// the server): every applied write since the compaction revision, on disk.
// A watcher whose events the hub's memory no longer holds (it started
// from an old revision, fell behind, or the node restarted or installed a
// snapshot since) reads them from it, and moves back to memory once it
// reaches what the hub holds.
type Store interface {
	// Changes calls fn with every change at revision from or later, in
	// revision order (a revision's changes in the order it made them),
	// until fn returns false. It fails with an error wrapping
	// errs.ErrCompacted if changes from revision from on are no longer
	// all stored. With prev, each event carries the key's previous value
	// (HasPrev, PrevValue, PrevMeta; PrevValue non-nil even when the key
	// did not exist, to say it was looked up).
	Changes(from uint64, prev bool, fn func(e wire.WatchEvent) bool) error
	// Prev is key as it was at revision rev (ok false: absent). It fails
	// with an error wrapping errs.ErrCompacted below the compaction.
	Prev(key []byte, rev uint64) (value []byte, m revision.Meta, ok bool, err error)
	// CompactRevision is the revision the history is compacted to: the
	// oldest revision a watch can start from is one past it.
	CompactRevision() uint64
}

// openStored opens a watcher that starts in the stored history, from
// revision from, which the hub no longer holds. The caller holds h.mu.
func (h *Hub) openStoredLocked(w *Watcher, from uint64) (*Watcher, error) {
	h.watchers++
	w.from, w.gen, w.progress, w.stored, w.at = from, h.gen, from-1, true, from
	h.register(w, true)
	return w, nil
}

// toStoredLocked moves w to the stored history, from the first revision it
// has not completed. The caller holds h.mu.
func (w *Watcher) toStoredLocked() {
	w.stored, w.at, w.atSkip, w.lost = true, w.progress+1, 0, false
}

// nextStored is Next for a watcher reading the stored history: the
// changes from revision w.at on, up to those the hub holds in memory,
// where it moves back.
func (w *Watcher) nextStored(dst []wire.WatchEvent, maxEvents, maxBytes int) ([]wire.WatchEvent, uint64, error) {
	h := w.h
	h.mu.RLock()
	oldest := h.oldest
	h.mu.RUnlock()
	if w.at >= oldest {
		h.mu.Lock()
		w.stored, w.gen, w.lost = false, h.gen, false
		w.next = h.seekLocked(w.at)
		h.mu.Unlock()
		return w.Next(dst, maxEvents, maxBytes)
	}
	r := storedRead{w: w, dst: dst, maxEvents: maxEvents, maxBytes: maxBytes, oldest: oldest, cursor: w.at,
		base: len(dst), revAt: len(dst)}
	err := h.cfg.Store.Changes(w.at, w.prevKV, r.take)
	if errors.Is(err, errs.ErrCompacted) {
		return dst, w.progress, &CompactedError{Requested: w.at, Oldest: h.cfg.Store.CompactRevision() + 1}
	}
	if err != nil {
		return dst, w.progress, err
	}
	return r.finish()
}

// storedRead gathers one Next's events from the stored history.
type storedRead struct {
	w                   *Watcher
	dst                 []wire.WatchEvent
	maxEvents, maxBytes int
	oldest              uint64 // the hub holds every event from it on
	n, size             int
	cursor              uint64 // the revision being read
	seen                bool   // some change was read
	skip                int    // matching events of cursor already sent
	full                bool   // stopped at the limits, inside cursor's revision or before it
	reached             bool   // stopped at the events the hub holds
	base                int    // len(dst) when the read began
	// revAt is where the last revision in dst begins, and revSkip the
	// skip of that revision before it: a cut inside that revision drops
	// its events if an earlier revision is in dst, to keep revisions whole.
	revAt, revSkip int
}

// take is the Changes callback: it appends the watcher's events until the
// limits, cutting between revisions, and a revision only when one alone is
// past them.
func (r *storedRead) take(e wire.WatchEvent) bool {
	w := r.w
	if e.Version >= r.oldest {
		r.reached = true
		return false
	}
	if e.Version != r.cursor {
		r.cursor, r.skip = e.Version, 0
	}
	r.seen = true
	if !w.matches(e.Key) || e.Version < w.from {
		return true
	}
	if e.Version == w.at && r.skip < w.atSkip {
		r.skip++ // sent by the Next that cut this revision
		return true
	}
	if r.n == r.maxEvents || (r.n > 0 && r.size+eventSize(&e) > r.maxBytes) {
		if r.dst[len(r.dst)-1].Version == e.Version && r.revAt > r.base {
			clear(r.dst[r.revAt:])
			r.dst, r.skip = r.dst[:r.revAt], r.revSkip
		}
		r.full = true
		return false
	}
	if len(r.dst) == r.base || r.dst[len(r.dst)-1].Version != e.Version {
		r.revAt, r.revSkip = len(r.dst), r.skip
	}
	r.dst = append(r.dst, e)
	r.n++
	r.size += eventSize(&e)
	r.skip++
	return true
}

// finish records where the next Next resumes, and the progress: every
// revision before the one the read stopped in is complete.
func (r *storedRead) finish() ([]wire.WatchEvent, uint64, error) {
	w := r.w
	switch {
	case r.full:
		w.at, w.atSkip = r.cursor, r.skip
		w.progress = max(w.progress, r.cursor-1)
	case r.reached:
		w.at, w.atSkip = r.oldest, 0
		w.progress = max(w.progress, r.oldest-1)
	case r.seen:
		// Every stored change was read; the next ones reach the hub.
		w.at, w.atSkip = r.cursor+1, 0
		w.progress = max(w.progress, r.cursor)
	}
	return r.dst, w.progress, nil
}
