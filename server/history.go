package server

import (
	kvstore "github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/wire"
)

// history is the node's stored history of changes as the watch hub reads
// it (watch.Store): a watcher whose events the hub's memory no longer
// holds is served from disk.
type history struct{ s *Server }

func (h history) Changes(from uint64, fn func(e wire.WatchEvent) bool) error {
	_, err := h.s.kv.Changes(from, func(c kvstore.Change) bool {
		// The change's bytes are the iteration's; the event outlives it.
		e := wire.WatchEvent{Type: wire.EventPut, Key: append([]byte(nil), c.Key...), Version: c.Meta.Mod}
		if c.Deleted {
			e.Type = wire.EventDelete
		} else {
			e.Value = append([]byte{}, c.Value...)
		}
		return fn(e)
	})
	return err
}

func (h history) CompactRevision() uint64 { return h.s.kv.CompactRevision() }
