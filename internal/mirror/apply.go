package mirror

import (
	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
)

// Apply mirrors one committed and durably applied batch into the region,
// under the table lock as a whole: RPC reads, which take the same lock,
// see the region only at batch boundaries, never ahead of or behind it
// within a batch (see Get). rev, the store revision after the batch, is
// published in the header once the batch's records are visible.
func (m *Mirror) Apply(ws []kv.Write, rev uint64) {
	if hook := m.cfg.Knobs.BeforeApply; hook != nil {
		hook(ws)
	}
	m.tmu.Lock()
	defer m.tmu.Unlock()
	if m.retired {
		return // the region is withdrawn (Retire)
	}
	if len(ws) > 0 && ws[0].Atomic {
		m.applyAtomicLocked(ws) // a transaction: one-sided readers see all of it or none (atomic.go)
	} else {
		for _, w := range ws {
			m.applyLocked(w.Meta, w.Key, w.Value, w.Deleted)
		}
	}
	// After the records: a reader takes the header's revision as a lower
	// bound on the state it reads later (docs/layout.md, "The revision
	// word"), so it must never run ahead of them.
	m.tbl.SetRevision(rev)
	m.caughtUpLocked()
	m.maybeCompleteLocked()
}

// Events hands every applied write to the Sink, in log order. It runs on
// the raft loop and does not block (the watch history takes its own lock,
// held only to append and evict).
func (m *Mirror) Events(ws []kv.Write, applied uint64, reset bool) {
	if m.cfg.Events == nil {
		return
	}
	if reset {
		m.cfg.Events.Reset(applied)
		return
	}
	m.events = m.events[:0]
	for _, w := range ws {
		e := wire.WatchEvent{Type: wire.EventPut, Key: w.Key, Value: w.Value, Version: w.Meta.Mod, Meta: w.Meta}
		if w.Deleted {
			e.Type, e.Value, e.Meta = wire.EventDelete, nil, revision.Meta{Mod: w.Meta.Mod}
		}
		m.events = append(m.events, e)
	}
	m.cfg.Events.Publish(m.events, applied)
	clear(m.events)
}

// The region may lack keys the node holds: a write it could not fit, or a
// rebuild that ran out of space or failed. Then the header's incomplete
// flag is set (before anything is removed, so no reader trusts a miss
// meanwhile), and the keys are remembered so the repair loop can put them
// back and clear it. Everything the region does show is current, so hits
// stay trustworthy. A held key's slot is cleared only once the flag has
// been set for a grace period (table.Evict, Reset: rule M4 of
// docs/layout.md), so that no GET that read the flag clear can miss it.

func (m *Mirror) applyLocked(meta revision.Meta, key, value []byte, deleted bool) {
	if deleted {
		m.forgetMissing(string(key))
		if _, err := m.tbl.Delete(key); err != nil {
			m.log.Error("table delete failed", "err", err)
		}
		return
	}
	err := m.tbl.Put(key, value, meta)
	if err == nil {
		m.forgetMissing(string(key))
		return
	}
	// The write is durable and committed, but the region cannot hold it
	// now. On the leader that only happens for a write it did not admit
	// itself (Reserve holds room for those); a follower's region differs
	// from the leader's (placement, fragmentation, limbo timing), and a
	// follower never refuses what the leader admitted.
	m.counts.applyMisses.Add(1)
	m.log.Warn("table cannot hold an applied write; region marked incomplete until repaired",
		"key_len", len(key), "value_len", len(value), "err", err)
	m.tbl.Evict(key) // flags the region; the old value's record dead at once, its slot kept for a grace period
	m.noteMissing(key, len(value))
	m.compactLocked() // if free space is cut up, the repair finds it whole a grace period from now
}

// noteMissing remembers key, whose value is valueLen bytes, as applied but
// not in the region. Admission counts the room its record needs
// (reserveLocked): a fresh region of the same size must hold it too.
func (m *Mirror) noteMissing(key []byte, valueLen int) {
	n := table.RecordLen(len(key), valueLen)
	m.missingBytes += n - m.missing[string(key)] // noted again: the new length
	m.missing[string(key)] = n
}

// forgetMissing drops key from the missing keys, if it is one.
func (m *Mirror) forgetMissing(key string) {
	if n, ok := m.missing[key]; ok {
		m.missingBytes -= n
		delete(m.missing, key)
	}
}

// maybeCompleteLocked clears the incomplete flag once nothing is missing.
// It runs only at batch boundaries: cleared in the middle of a batch, the
// flag would let a reader trust a miss for a key a later write of the same
// batch is about to add. The table may refuse for up to a grace period
// (rules M3 and M4, table.CompleteIn); the next batch, or the repair
// loop's next tick a grace period from now at most, asks again.
func (m *Mirror) maybeCompleteLocked() {
	if len(m.missing) == 0 && !m.rebuilding && !m.rebuildFailed && m.tbl.Header().Incomplete {
		m.tbl.SetIncomplete(false)
	}
}
