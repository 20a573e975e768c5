package watch

import (
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
)

// PrevReads shares the previous values PrevKV watchers read from the
// stored history among the watchers one goroutine reads (a server
// connection's): watchers of one key at one point of the history need
// the same previous value for each event, and a read of the store is
// the costliest part of serving each. With N such watchers an event
// costs one read, not N.
//
// It holds what it read until Clear, at most maxPrevReadsBytes of
// values; past that, reads are not kept. The zero value is ready. It is
// for one goroutine at a time, as its watchers' Next is.
type PrevReads struct {
	m     map[prevAt]prevRead
	bytes int
}

// prevAt names a previous value: the key at revision rev.
type prevAt struct {
	rev uint64
	key string
}

type prevRead struct {
	value []byte
	meta  revision.Meta
	ok    bool
}

// maxPrevReadsBytes bounds the keys and values a PrevReads holds: a
// message's worth, what one watcher's Next may read anyway.
const maxPrevReadsBytes = limits.MaxWatchBytes

// Clear forgets what p holds; call it when the watchers' round is over,
// so that an idle connection holds none of it.
func (p *PrevReads) Clear() {
	clear(p.m)
	p.bytes = 0
}

// SharePrev makes a PrevKV watcher look up and keep its previous values
// in p, shared with the other watchers of p (which must all be read by
// one goroutine). Values found there are shared between their events,
// which must not modify them.
func SharePrev(p *PrevReads) Option { return func(w *Watcher) { w.shared = p } }

// prev is key as it was at revision rev: from w's PrevReads if it has
// it, else read from the store (and kept there if there is room).
func (w *Watcher) prev(key []byte, rev uint64) ([]byte, revision.Meta, bool, error) {
	p := w.shared
	if p != nil {
		if r, ok := p.m[prevAt{rev, string(key)}]; ok {
			return r.value, r.meta, r.ok, nil
		}
	}
	v, m, ok, err := w.h.cfg.Store.Prev(key, rev)
	if err != nil || p == nil {
		return v, m, ok, err
	}
	if size := len(key) + len(v); p.bytes+size <= maxPrevReadsBytes {
		if p.m == nil {
			p.m = map[prevAt]prevRead{}
		}
		p.m[prevAt{rev, string(key)}] = prevRead{v, m, ok}
		p.bytes += size
	}
	return v, m, ok, nil
}
