package server

import (
	"github.com/kvd-project/kvd/internal/revision"
	kvstore "github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/wire"
)

// history is the node's stored history of changes as the watch hub reads
// it (watch.Store): a watcher whose events the hub's memory no longer
// holds is served from disk, and a prev_kv watcher's previous values come
// from it.
type history struct{ s *Server }

func (h history) Changes(from uint64, prev bool, fn func(e wire.WatchEvent) bool) error {
	_, err := h.s.kv.Changes(from, func(c kvstore.Change) bool {
		// The change's bytes are the iteration's; the event outlives it.
		e := wire.WatchEvent{Type: wire.EventPut, Key: append([]byte(nil), c.Key...), Version: c.Meta.Mod, Meta: c.Meta}
		if c.Deleted {
			// A tombstone may hold more than its revision: a delete
			// event's metadata is its revision alone.
			e.Type, e.Meta = wire.EventDelete, revision.Meta{Mod: c.Meta.Mod}
		} else {
			e.Value = append([]byte{}, c.Value...)
		}
		if prev {
			// Non-nil even when absent: the watcher looked it up.
			e.PrevValue, e.PrevMeta, e.HasPrev = []byte{}, revision.Meta{}, c.HasPrev
			if c.HasPrev {
				e.PrevValue, e.PrevMeta = append(e.PrevValue, c.PrevValue...), c.PrevMeta
			}
		}
		return fn(e)
	})
	return err
}

func (h history) Prev(key []byte, rev uint64) (value []byte, m revision.Meta, ok bool, err error) {
	if rev == 0 {
		return nil, m, false, nil // before the first write (and RangeAt's 0 is the latest)
	}
	end := append(append(make([]byte, 0, len(key)+1), key...), 0)
	_, err = h.s.kv.RangeAt(key, end, rev, func(_, v []byte, meta revision.Meta) bool {
		value, m, ok = append([]byte{}, v...), meta, true
		return false
	})
	return value, m, ok, err
}

func (h history) CompactRevision() uint64 { return h.s.kv.CompactRevision() }
