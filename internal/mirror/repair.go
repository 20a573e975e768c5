package mirror

import (
	"errors"
	"time"

	"github.com/kvd-project/kvd/internal/table"
)

// Repacking. A follower's region places the same writes as the leader's,
// but in a different history (limbo timing, moves), so its free space can
// end up cut into holes smaller than any record while the leader's is
// whole. Compaction cannot help then: it moves records into free holes,
// and there are none big enough. The keys stay missing (reads of them go
// by RPC) for as long as the data stays as it is, and a follower that
// becomes leader keeps serving them by RPC. When the repair loop has
// neither placed a key nor compacted a byte for repackAfter passes in a
// row, and the missing records would fit the area's free bytes and the
// table's key capacity if packed, it rebuilds the region (rebuildLocked),
// which places every key as a fresh region would. A rebuild holds the
// table lock for about two grace periods (the apply path waits), so
// repacks back off: each one that still leaves keys missing doubles the
// passes before the next, up to maxRepackPasses. A region that is simply
// too small for the data is never repacked: that waits for deletes.
const (
	// repackPasses is how many stalled repair passes (one per grace
	// period) come before a repack.
	repackPasses = 4
	// maxRepackPasses bounds the back-off between repacks.
	maxRepackPasses = 256
)

// repairLoop puts back what the region could not hold, once space allows,
// reruns a rebuild that failed, and keeps the header's leader hint
// current; one pass per grace period until Close.
func (m *Mirror) repairLoop() {
	defer m.loop.Done()
	t := time.NewTicker(m.cfg.Table.Grace)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		if p := m.cfg.Knobs.PauseRepair; p != nil && p() {
			continue
		}
		leader := m.store.Leader()
		m.tmu.Lock()
		m.tbl.SetLeaderHint(leader)
		if m.rebuildFailed {
			if err := m.rebuildLocked(); err != nil {
				m.log.Error("region rebuild failed again", "err", err)
			}
		} else {
			m.repairLocked()
		}
		m.tmu.Unlock()
	}
}

// repairLocked reads each missing key from the store, except while the
// store is ahead by a batch (atomic.go). The store is at most one batch
// ahead of the region (kv.Publisher), and a key the region lacks is
// answered from the store by every read (Get), so putting the store's
// value in the region never shows readers an older one; the pending batch
// then rewrites the key with the same value. It also gathers fragmented
// free space (compactLocked), so that it is whole again a grace period
// later, and repacks a region that stays stuck (see above).
func (m *Mirror) repairLocked() {
	m.compactLocked()
	compacted := m.tbl.Compacted() // by this pass or by an apply since the last
	moved := compacted != m.compactedSeen
	m.compactedSeen = compacted
	if m.ahead != nil {
		return // the store holds a batch the region has not applied: it could show part of it
	}
	placed, need, packable := false, uint64(0), true
	for k := range m.missing {
		value, meta, ok, err := m.store.Get([]byte(k))
		if err != nil {
			return
		}
		if !ok {
			// Deleted, in a batch the region has not applied yet: its
			// slot, if still kept (table.Evict), goes now, as that
			// batch's delete will make it go.
			m.tbl.Delete([]byte(k))
			m.forgetMissing(k)
			continue
		}
		switch err := m.tbl.Put([]byte(k), value, meta); {
		case err == nil:
			m.forgetMissing(k)
			placed = true
		case errors.Is(err, table.ErrNoSpace):
			need += table.RecordLen(len(k), len(value))
		default:
			packable = false
		}
	}
	m.maybeCompleteLocked()
	m.maybeRepackLocked(placed || moved, packable, need)
}

// maybeRepackLocked counts repair passes that made no progress and
// repacks the region after repackAfter of them, if that would place the
// missing keys.
func (m *Mirror) maybeRepackLocked(progress, packable bool, need uint64) {
	if len(m.missing) == 0 {
		m.stalls, m.repackAfter = 0, repackPasses
		return
	}
	if progress {
		m.stalls = 0
		return
	}
	if m.stalls++; m.stalls < m.repackAfter {
		return
	}
	m.stalls = 0
	st := m.tbl.Stats()
	if !packable || st.BytesUsed+st.BytesReserved+need > st.BytesArea ||
		st.Keys+st.SlotsHeld+st.SlotsPending+len(m.missing) > st.KeyCapacity {
		return // too small for the data: only deletes help
	}
	m.repackAfter = min(2*m.repackAfter, maxRepackPasses)
	m.counts.repacks.Add(1)
	m.log.Warn("region cannot place missing keys in its fragmented free space; repacking it",
		"missing", len(m.missing), "need_bytes", need, "free_bytes", st.BytesFree, "largest_free", st.LargestFree)
	if err := m.rebuildLocked(); err != nil {
		m.log.Error("region repack failed; region stays incomplete and the rebuild is retried", "err", err)
	}
}

// compactLocked moves up to an eighth of the region's records out of the
// stretch of the record area where free space is most cut up by them, if
// it is (table.Compact); at most once per grace period.
func (m *Mirror) compactLocked() {
	if n := m.tbl.Compact(uint64(len(m.cfg.Region)) / 8); n > 0 {
		m.log.Debug("table compacted", "bytes_moved", n)
	}
}
