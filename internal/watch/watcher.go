package watch

import (
	"bytes"
	"errors"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// Watcher is one watch: a cursor into the hub's history. Its methods are
// for one goroutine at a time.
type Watcher struct {
	h      *Hub
	key    []byte
	prefix bool
	from   uint64 // events below this version are not for it
	next   uint64 // sequence number of the next event to look at
	gen    uint64
	// progress: every matching event with a version up to it was returned.
	progress uint64
	closed   bool
	lost     bool // the history evicted an event it needed (markLostLocked)
	// stored: it reads the stored history (Config.Store, stored.go),
	// from revision at, of whose matching events atSkip were sent.
	stored bool
	at     uint64
	atSkip int
	prevKV bool // its events carry the key's previous value (PrevKV)
	// shared: where it looks up and keeps previous values (SharePrev).
	shared *PrevReads
}

// Option adjusts one Watch.
type Option func(*Watcher)

// PrevKV gives each event the key's value and metadata just before its
// revision (etcd's prev_kv), read from the stored history: only watchers
// that ask pay for it.
func PrevKV() Option { return func(w *Watcher) { w.prevKV = true } }

// ErrPrevKVNeedsStore: a hub without a stored history cannot tell a key's
// previous value.
var ErrPrevKVNeedsStore = errors.New("watch: prev_kv needs the stored history")

// Watch opens a watcher of key (with prefix, of every key starting with
// it) from version from on; from 0 is "from now": after the applied
// index. It fails with ErrTooManyWatchers, or a *CompactedError if the
// history no longer holds every event from that version on. Progress is
// from-1 until events come.
func (h *Hub) Watch(key []byte, prefix bool, from uint64, opts ...Option) (*Watcher, error) {
	w := &Watcher{h: h, key: append([]byte(nil), key...), prefix: prefix}
	for _, o := range opts {
		o(w)
	}
	if w.prevKV && h.cfg.Store == nil {
		return nil, ErrPrevKVNeedsStore
	}
	// Read before h.mu: the store is not to be called under the lock its
	// apply loop publishes through.
	var compacted uint64
	if h.cfg.Store != nil {
		compacted = h.cfg.Store.CompactRevision()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watchers >= h.cfg.MaxWatchers {
		return nil, ErrTooManyWatchers
	}
	if from == 0 {
		from = h.applied + 1
	}
	if h.cfg.Store != nil {
		// The cluster's compaction, not this node's memory, decides what
		// a watch can start from: every member answers alike.
		if from <= compacted {
			return nil, &CompactedError{Requested: from, Oldest: compacted + 1}
		}
		if from < h.oldest {
			return h.openStoredLocked(w, from)
		}
	} else if from < h.oldest {
		return nil, &CompactedError{Requested: from, Oldest: h.oldest}
	}
	h.watchers++
	w.from, w.next, w.gen, w.progress = from, h.seekLocked(from), h.gen, from-1
	h.register(w, true)
	return w, nil
}

// Synced reports whether the watcher has returned every event the hub
// published: its progress is the hub's applied revision (etcd's synced
// watchers, the only ones told their progress).
func (w *Watcher) Synced() bool {
	w.h.mu.RLock()
	defer w.h.mu.RUnlock()
	return !w.stored && w.progress >= w.h.applied
}

// Progress is the version through which the watcher is complete.
func (w *Watcher) Progress() uint64 { return w.progress }

// Close releases the watcher's place in the hub. Idempotent.
func (w *Watcher) Close() {
	if w.closed {
		return
	}
	w.closed = true
	w.h.mu.Lock()
	w.h.watchers--
	w.h.register(w, false)
	w.h.mu.Unlock()
}

// register adds w to the hub's index of open watchers, or (add false)
// takes it out. The caller holds h.mu.
func (h *Hub) register(w *Watcher, add bool) {
	if w.prefix {
		if add {
			h.prefixed[w] = struct{}{}
		} else {
			delete(h.prefixed, w)
		}
		return
	}
	k := string(w.key)
	switch ws := h.byKey[k]; {
	case add && ws == nil:
		h.byKey[k] = map[*Watcher]struct{}{w: {}}
	case add:
		ws[w] = struct{}{}
	default:
		delete(ws, w)
		if len(ws) == 0 {
			delete(h.byKey, k)
		}
	}
}

// behindLocked reports whether the hub's memory lost events w needs: a
// reset (start, snapshot install) past its progress, or an eviction of
// its events. The caller holds h.mu.
func (w *Watcher) behindLocked() bool {
	h := w.h
	if w.gen != h.gen && w.from <= h.resetAt && w.progress < h.resetAt {
		return true
	}
	return w.next < h.first && w.lost
}

func (w *Watcher) matches(key []byte) bool {
	if w.prefix {
		return bytes.HasPrefix(key, w.key)
	}
	return bytes.Equal(key, w.key)
}

// Next appends to dst the watcher's pending events, in commit order: at
// most maxEvents of at most maxBytes of keys and values, but at least one
// if any is pending. It ends at a revision's end, unless the first
// revision alone is past the bounds: then it returns part of it (its
// progress stays below that revision: a fragment). It returns them and
// the watcher's progress. Keys and values are shared with the history
// and must not be modified. It fails with a *CompactedError if the
// history lost events the watcher still needed: it fell behind (Slow) or
// the node installed a snapshot (or, with PrevKV, the compaction passed
// an event's previous revision meanwhile).
func (w *Watcher) Next(dst []wire.WatchEvent, maxEvents, maxBytes int) ([]wire.WatchEvent, uint64, error) {
	base := len(dst)
	dst, progress, err := w.next1(dst, maxEvents, maxBytes)
	if err != nil || !w.prevKV {
		return dst, progress, err
	}
	return dst, progress, w.fillPrev(dst[base:])
}

// fillPrev gives each event the key as it was just before its revision.
// Events the stored history served have it already. Events dense in
// revisions (a range delete's, a busy prefix's) take it from one read of
// the stored changes over their span; sparse ones, a read each.
func (w *Watcher) fillPrev(evs []wire.WatchEvent) error {
	todo := 0
	for i := range evs {
		if !evs[i].HasPrev && evs[i].PrevValue == nil {
			todo++
		}
	}
	if todo == 0 {
		return nil
	}
	var err error
	if span := evs[len(evs)-1].Version - evs[0].Version + 1; todo >= denseEvents && span <= uint64(todo) {
		err = w.prevFromChanges(evs)
	} else {
		err = w.prevEach(evs)
	}
	if errors.Is(err, errs.ErrCompacted) {
		return &CompactedError{Requested: evs[0].Version, Oldest: w.h.cfg.Store.CompactRevision() + 1}
	}
	return err
}

// denseEvents is the fewest events fillPrev reads in one pass over the
// stored changes: below it, a read each costs less than opening the pass.
const denseEvents = 8

func (w *Watcher) prevEach(evs []wire.WatchEvent) error {
	for i := range evs {
		e := &evs[i]
		if e.HasPrev || e.PrevValue != nil {
			continue
		}
		v, m, ok, err := w.prev(e.Key, e.Version-1)
		if err != nil {
			return err
		}
		setPrev(e, v, m, ok)
	}
	return nil
}

// prevFromChanges reads the stored changes from the first event's revision
// to the last's, and gives each event its change's previous value. Within
// a revision a key changes once, so revision and key name the change.
func (w *Watcher) prevFromChanges(evs []wire.WatchEvent) error {
	type at struct {
		rev uint64
		key string
	}
	idx := make(map[at]int, len(evs))
	for i := range evs {
		if !evs[i].HasPrev && evs[i].PrevValue == nil {
			idx[at{evs[i].Version, string(evs[i].Key)}] = i
		}
	}
	last := evs[len(evs)-1].Version
	err := w.h.cfg.Store.Changes(evs[0].Version, true, func(c wire.WatchEvent) bool {
		if i, ok := idx[at{c.Version, string(c.Key)}]; ok {
			setPrev(&evs[i], c.PrevValue, c.PrevMeta, c.HasPrev)
			delete(idx, at{c.Version, string(c.Key)})
		}
		return len(idx) > 0 && c.Version <= last
	})
	if err == nil && len(idx) > 0 {
		// Not stored yet, or no longer: read those one by one.
		return w.prevEach(evs)
	}
	return err
}

// setPrev records an event's previous value; a looked-up absent one is an
// empty, non-nil PrevValue without HasPrev.
func setPrev(e *wire.WatchEvent, v []byte, m revision.Meta, ok bool) {
	if ok {
		e.PrevValue, e.PrevMeta, e.HasPrev = v, m, true
		if v == nil {
			e.PrevValue = []byte{}
		}
		return
	}
	e.PrevValue = []byte{}
}

func (w *Watcher) next1(dst []wire.WatchEvent, maxEvents, maxBytes int) ([]wire.WatchEvent, uint64, error) {
	if w.stored {
		return w.nextStored(dst, maxEvents, maxBytes)
	}
	h := w.h
	h.mu.RLock()
	if h.cfg.Store != nil && w.behindLocked() {
		// Only the hub moves a watcher behind, and never back.
		h.mu.RUnlock()
		h.mu.Lock()
		w.toStoredLocked()
		h.mu.Unlock()
		return w.nextStored(dst, maxEvents, maxBytes)
	}
	defer h.mu.RUnlock()
	if w.gen != h.gen {
		if w.from <= h.resetAt && w.progress < h.resetAt {
			return dst, w.progress, &CompactedError{Requested: w.progress + 1, Oldest: h.oldest}
		}
		w.gen, w.next = h.gen, max(w.next, h.first)
	}
	if w.next < h.first {
		if w.lost {
			return dst, w.progress, &CompactedError{Requested: w.progress + 1, Oldest: h.oldest, Slow: true}
		}
		w.next = h.first // what was evicted past it was not for it
	}
	held := h.buf[h.off:]
	size, n := 0, 0
	base := len(dst)
	// The revision being gathered: its first event's index in dst and
	// sequence number.
	revAt, revSeq := base, w.next
	for ; w.next < h.first+uint64(len(held)); w.next++ {
		e := held[w.next-h.first]
		if e.Version < w.from || !w.matches(e.Key) {
			continue
		}
		if n == maxEvents || (n > 0 && size+eventSize(&e) > maxBytes) {
			// Cut before e. If e belongs to the last revision returned,
			// end at the revision before it instead, or, if that is the
			// only one, return part of it (its progress stays below it).
			last := dst[len(dst)-1].Version
			switch {
			case e.Version != last:
			case revAt > base:
				clear(dst[revAt:])
				dst, w.next = dst[:revAt], revSeq
				last = dst[len(dst)-1].Version
			default:
				last--
			}
			w.progress = max(w.progress, last)
			return dst, w.progress, nil
		}
		if len(dst) == base || e.Version != dst[len(dst)-1].Version {
			revAt, revSeq = len(dst), w.next
		}
		dst = append(dst, e)
		size += eventSize(&e)
		n++
	}
	w.progress = max(w.progress, h.applied)
	return dst, w.progress, nil
}
