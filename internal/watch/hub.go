package watch

import (
	"fmt"
	"sort"
	"sync"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/wire"
)

// Defaults of Config.
const (
	DefaultHistoryEvents = 10000
	DefaultHistoryBytes  = 64 << 20
	DefaultMaxWatchers   = 10000
)

// Config bounds a Hub.
type Config struct {
	// HistoryEvents is the most events the history holds, except that the
	// newest version's events are kept however many. Default
	// DefaultHistoryEvents.
	HistoryEvents int
	// HistoryBytes is the most bytes of keys and values it holds, except
	// that the newest version's events are kept whatever their size.
	// Default DefaultHistoryBytes (64 MiB).
	HistoryBytes int
	// MaxWatchers is the most watchers open at once. Default
	// DefaultMaxWatchers.
	MaxWatchers int
	// Store is the stored history, which serves watchers the memory no
	// longer holds events for (stored.go). Nil: none, and such a watch
	// fails as compacted.
	Store Store
}

// WithDefaults returns c with its zero fields set to their defaults
// (exported: server.Config embeds a Config).
func (c Config) WithDefaults() Config {
	if c.HistoryEvents == 0 {
		c.HistoryEvents = DefaultHistoryEvents
	}
	if c.HistoryBytes == 0 {
		c.HistoryBytes = DefaultHistoryBytes
	}
	if c.MaxWatchers == 0 {
		c.MaxWatchers = DefaultMaxWatchers
	}
	return c
}

// Validate reports whether c is usable. Zero fields are checked as their
// defaults; c itself is not changed.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.HistoryEvents < 0 || c.HistoryBytes < 0 || c.MaxWatchers < 0:
		return fmt.Errorf("watch: negative bound in %+v", c)
	case c.HistoryBytes < limits.MaxWatchBytes:
		// Smaller, and one large value would evict everything else.
		return fmt.Errorf("watch: history of %d bytes is below the minimum %d", c.HistoryBytes, limits.MaxWatchBytes)
	}
	return nil
}

// ErrTooManyWatchers: the hub holds Config.MaxWatchers watchers already.
var ErrTooManyWatchers = errs.ErrTooManyWatchers

// CompactedError: the history no longer holds (or never held) events a
// watcher needs. Oldest is the oldest version a new watch can start from.
type CompactedError struct {
	Requested uint64 // the first version the watcher needed
	Oldest    uint64
	// Slow: an open watcher fell behind the history (its client did not
	// read its events fast enough) and was dropped; otherwise the watch
	// asked for a version that is gone, or the node installed a snapshot.
	Slow bool
}

func (e *CompactedError) Error() string {
	if e.Slow {
		return fmt.Sprintf("slow watcher dropped: it fell behind this node's event history (needed revision %d, oldest held %d)",
			e.Requested, e.Oldest)
	}
	return fmt.Sprintf("revision %d has been compacted (oldest held %d)", e.Requested, e.Oldest)
}

// Hub is a node's event history and its watchers. It is safe for concurrent
// use: one goroutine publishes, each watcher is read by one goroutine.
type Hub struct {
	cfg Config

	mu     sync.RWMutex
	buf    []wire.WatchEvent // the history is buf[off:]
	off    int
	first  uint64 // sequence number of buf[off]; events are numbered from 0
	bytes  int
	oldest uint64 // every event with a version >= oldest is held (or to come)
	// applied is the index the history is complete through.
	applied uint64
	// gen counts Resets; a watcher of an older generation checks resetAt.
	gen, resetAt uint64
	changed      chan struct{} // closed and replaced by every Publish
	watchers     int
	// The open watchers, so that eviction can tell whose events it drops
	// (markLostLocked): by key, and those of a prefix.
	byKey    map[string]map[*Watcher]struct{}
	prefixed map[*Watcher]struct{}
}

// New returns an empty hub whose history starts after index 0.
func New(cfg Config) (*Hub, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Hub{cfg: cfg, oldest: 1, changed: make(chan struct{}),
		byKey: map[string]map[*Watcher]struct{}{}, prefixed: map[*Watcher]struct{}{}}, nil
}

func eventSize(e *wire.WatchEvent) int { return len(e.Key) + len(e.Value) }

// Publish appends an applied batch's events, in log order, and says the
// history is complete through applied. It copies keys and values.
func (h *Hub) Publish(evs []wire.WatchEvent, applied uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range evs {
		if e.Version < h.oldest || e.Version <= h.applied {
			continue // before a Reset: the history starts after it
		}
		kv := make([]byte, len(e.Key)+len(e.Value))
		k := copy(kv, e.Key)
		copy(kv[k:], e.Value)
		e.Key, e.Value = kv[:k:k], kv[k:]
		if e.Type == wire.EventDelete {
			e.Value = nil
		}
		h.buf = append(h.buf, e)
		h.bytes += eventSize(&e)
	}
	h.applied = max(h.applied, applied)
	h.evictLocked()
	h.notifyLocked()
}

// evictLocked drops the oldest events beyond the bounds. A version is
// served only while all of its events are held, so oldest moves past the
// version of every evicted event.
func (h *Hub) evictLocked() {
	// The newest version always stays whole, whatever its size: a
	// caught-up watcher must get every write, and one of a 1 MiB value
	// under a long key is more than the smallest history allowed
	// (Validate) holds, as are a transaction's writes (up to 64) or a lease
	// revoke's deletes (up to 1000) against a small HistoryEvents. Evicting
	// part of it would drop every watcher, caught up or not, and leave that
	// version to no one.
	if len(h.buf) == h.off {
		return
	}
	newest := h.buf[len(h.buf)-1].Version
	n, bytes := 0, h.bytes
	for held := len(h.buf) - h.off; (held > h.cfg.HistoryEvents || bytes > h.cfg.HistoryBytes) &&
		h.buf[h.off+n].Version < newest; held-- {
		bytes -= eventSize(&h.buf[h.off+n])
		n++
	}
	h.markLostLocked(n)
	for range n {
		e := &h.buf[h.off]
		h.bytes -= eventSize(e)
		h.oldest = max(h.oldest, e.Version+1)
		*e = wire.WatchEvent{}
		h.off++
		h.first++
	}
	if h.off > 1024 && h.off > (len(h.buf)-h.off) {
		n := copy(h.buf, h.buf[h.off:])
		clear(h.buf[n:])
		h.buf, h.off = h.buf[:n], 0
	}
}

// markLostLocked marks lost every watcher that has not yet been sent one
// of its events among the n oldest held, which are about to be evicted: at
// its next Next it is dropped as slow. A watcher whose cursor is among them
// but which none of them was for (a quiet key behind a burst of writes to
// others) lost nothing and moves on: dropped as slow, its client's resume
// from the version it was at would fail as compacted.
func (h *Hub) markLostLocked(n int) {
	if n == 0 {
		return
	}
	end := h.first + uint64(n)
	lose := func(w *Watcher, seq uint64, e *wire.WatchEvent) {
		if seq >= w.next && e.Version >= w.from {
			w.lost = true
		}
	}
	for i, e := range h.buf[h.off : h.off+n] {
		for w := range h.byKey[string(e.Key)] {
			lose(w, h.first+uint64(i), &e)
		}
	}
	for w := range h.prefixed {
		for seq := max(w.next, h.first); !w.lost && seq < end; seq++ {
			if e := &h.buf[h.off+int(seq-h.first)]; w.matches(e.Key) {
				lose(w, seq, e)
			}
		}
	}
}

func (h *Hub) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// Reset forgets the history up to index: events up to it are unknown here
// (the node starts, or installed a snapshot). Events published after it
// are kept. Watchers that still need a version up to index fail at their
// next Next.
func (h *Hub) Reset(index uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.off < len(h.buf) && h.buf[h.off].Version <= index {
		h.bytes -= eventSize(&h.buf[h.off])
		h.buf[h.off] = wire.WatchEvent{}
		h.off++
		h.first++
	}
	h.oldest = max(h.oldest, index+1)
	h.applied = max(h.applied, index)
	h.gen++
	h.resetAt = max(h.resetAt, index)
	h.notifyLocked()
}

// Changed is closed by the next Publish or Reset.
func (h *Hub) Changed() <-chan struct{} {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.changed
}

// Oldest is the oldest version a watch can start from now.
func (h *Hub) Oldest() uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.oldest
}

// Len is how many events the history holds, and their bytes.
func (h *Hub) Len() (events, bytes int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.buf) - h.off, h.bytes
}

// Watchers is how many watchers are open.
func (h *Hub) Watchers() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.watchers
}

// seekLocked is the sequence number of the first held event with a
// version >= v (the end if none).
func (h *Hub) seekLocked(v uint64) uint64 {
	held := h.buf[h.off:]
	return h.first + uint64(sort.Search(len(held), func(i int) bool { return held[i].Version >= v }))
}
