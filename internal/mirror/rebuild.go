package mirror

import (
	"errors"
	"time"

	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
)

// Restore rebuilds the region after the node installed a snapshot.
func (m *Mirror) Restore() {
	m.tmu.Lock()
	defer m.tmu.Unlock()
	if err := m.rebuildLocked(); err != nil {
		m.log.Error("rebuild after snapshot failed; region stays incomplete and the rebuild is retried", "err", err)
		return
	}
	if n := len(m.missing); n > 0 {
		m.log.Warn("rebuild after snapshot could not place every key yet; repairing as space frees", "missing", n)
	}
}

// rebuildLocked refills the table from the store's applied state
// (docs/design/one-round-trip-gets.md §5.7, "Rebuild"). The lease word
// stays clear until it is done (clients that cached an earlier expiry
// still judge hits by it, which is sound: a live record is its key's
// current one whatever else the region lacks; docs/layout.md, "The cached
// expiry"). The steps:
//
//  1. table.Reset raises the incomplete flag, so no reader trusts a miss,
//     marks every record dead, and starts the hiding phase: records the
//     rebuild writes stay hidden until step 5.
//  2. Wait until the old contents' slots may clear, a grace period after
//     the flag was set (rule M4: no reader that read the flag clear can
//     miss a key the rebuild puts back), so keys find the slots as a
//     fresh region has them.
//  3. Wait until the arenas' limbo drains (the inline grace period), so
//     every small record fits its bucket's arena; and, if the large
//     records need it, the record area's (waitForRoomLocked).
//  4. Put every key. The table places them as a rebuild (unlimited search,
//     moves that free a hidden record's old copy at once): whatever order
//     they come in, every key set that the table held before fits again,
//     every small record inline (docs/layout.md, "Placement").
//  5. Wait RevealIn (the inline grace period after the last such free),
//     then Reveal: the records turn live, and hits work again.
//  6. maybeCompleteLocked: the flag clears a grace period after the last
//     placement (rule M3), on a later batch or repair tick if not now.
//
// Keys that still do not fit (a smaller region than the data needs, or a
// leader that admitted more than this node can hold) are left to the
// repair loop, which puts them back with everyday Puts after Reveal. If
// the walk fails, the region stays flagged incomplete and hidden (it is
// partial; reads go by RPC) and the repair loop runs the rebuild again,
// whose Reset marks the hidden records dead like any others.
func (m *Mirror) rebuildLocked() error {
	m.setRebuilding(true)
	m.tbl.Reset()
	m.waitLocked(m.tbl.PendingClearsIn(), "the old contents' slots to clear")
	m.waitLocked(m.tbl.ArenaLimboClearsIn(), "the arenas' limbo to drain")
	clear(m.missing)
	m.missingBytes = 0
	m.waitForRoomLocked()
	// Read before the walk: the walk's view is at least this far along, so
	// publishing it once the walk's records are live never runs ahead of
	// them (docs/layout.md, "The revision word").
	rev, err := m.store.Revision()
	if err == nil {
		err = m.walk(func(key, value []byte, meta revision.Meta) error {
			err := m.tbl.Put(key, value, meta)
			if errors.Is(err, table.ErrNoSpace) {
				m.noteMissing(key, len(value))
				return nil
			}
			return err
		})
	}
	if err == nil {
		m.waitLocked(m.tbl.RevealIn(), "the rebuild's freed arena bytes to age")
		err = m.tbl.Reveal() // ErrTooEarly only if the wait was cut short (the mirror closes)
	}
	if err == nil {
		m.tbl.SetRevision(rev)
	}
	m.rebuildFailed = err != nil
	m.setRebuilding(false)
	m.maybeCompleteLocked()
	return err
}

// walk is the store's ForEach, with the WalkKey knob.
func (m *Mirror) walk(fn func(key, value []byte, meta revision.Meta) error) error {
	hook := m.cfg.Knobs.WalkKey
	if hook == nil {
		return m.store.ForEach(fn)
	}
	i := 0
	return m.store.ForEach(func(key, value []byte, meta revision.Meta) error {
		if err := hook(i); err != nil {
			return err
		}
		i++
		return fn(key, value, meta)
	})
}

// waitForRoomLocked makes sure a rebuild's large records fit the record
// area (the small ones go inline: the arenas' limbo has drained).
// The old contents went to limbo when their slots cleared, and their space
// stays there for the grace period. Records that need no more than the largest free extent
// always fit (the allocator fills an extent front to back), so when they
// do, or when nothing is in limbo (a fresh region at start), it returns at
// once; otherwise it waits until limbo has drained, holding the table lock
// (this runs on the apply path, like the rest of the rebuild; it is at
// most one grace period), after which the area is as free as it gets.
func (m *Mirror) waitForRoomLocked() {
	d := m.tbl.LimboClearsIn()
	if d == 0 {
		return
	}
	var need uint64
	if err := m.walk(func(key, value []byte, _ revision.Meta) error {
		if !m.tbl.FitsInline(len(key), len(value)) {
			need += table.RecordLen(len(key), len(value))
		}
		return nil
	}); err != nil {
		return // the rebuild's own walk meets it
	}
	if need <= m.tbl.Stats().LargestFree {
		return
	}
	m.waitLocked(d, "the old contents' space to leave limbo", "bytes", need)
}

// waitLocked waits d, holding the table lock (it runs on the apply path,
// as the rest of a rebuild does), or until the mirror closes.
func (m *Mirror) waitLocked(d time.Duration, what string, args ...any) {
	if d <= 0 {
		return
	}
	m.log.Info("rebuild waits for "+what, append([]any{"wait", d}, args...)...)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-m.stop:
	}
}
