package server

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
// reruns a rebuild that failed, and keeps the header's leader hint current.
func (s *Server) repairLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ReuseGrace)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if s.testPauseRepair.Load() {
			continue
		}
		leader := s.node.Status().LeaderID
		s.tmu.Lock()
		s.tbl.SetLeaderHint(leader)
		if s.rebuildFailed {
			if err := s.rebuildLocked(); err != nil {
				s.log.Error("region rebuild failed again", "err", err)
			}
		} else {
			s.repairLocked()
		}
		s.tmu.Unlock()
	}
}

// repairLocked reads each missing key from Pebble, except while Pebble is
// ahead by a transaction's batch (atomic.go). Pebble is at most one
// batch ahead of the region (kv.Publisher), and a key the region lacks is
// answered from Pebble by every read (handler.go), so putting Pebble's
// value in the region never shows readers an older one; the pending batch
// then rewrites the key with the same value. It also gathers fragmented
// free space (compactLocked), so that it is whole again a grace period
// later, and repacks a region that stays stuck (see above).
func (s *Server) repairLocked() {
	s.compactLocked()
	compacted := s.tbl.Compacted() // by this pass or by an apply since the last
	moved := compacted != s.compactedSeen
	s.compactedSeen = compacted
	if s.ahead != nil {
		return // Pebble holds a transaction the region has not applied: it could show part of it
	}
	placed, need, packable := false, uint64(0), true
	for k := range s.missing {
		value, version, ok, err := s.kv.Get([]byte(k))
		if err != nil {
			return
		}
		if !ok {
			// Deleted, in a batch the region has not applied yet: its
			// slot, if still kept (table.Evict), goes now, as that
			// batch's delete will make it go.
			s.tbl.Delete([]byte(k))
			s.forgetMissing(k)
			continue
		}
		switch err := s.tbl.Put([]byte(k), value, version); {
		case err == nil:
			s.forgetMissing(k)
			placed = true
		case errors.Is(err, table.ErrNoSpace):
			need += table.RecordLen(len(k), len(value))
		default:
			packable = false
		}
	}
	s.maybeCompleteLocked()
	s.maybeRepackLocked(placed || moved, packable, need)
}

// maybeRepackLocked counts repair passes that made no progress and
// repacks the region after repackAfter of them, if that would place the
// missing keys.
func (s *Server) maybeRepackLocked(progress, packable bool, need uint64) {
	if len(s.missing) == 0 {
		s.stalls, s.repackAfter = 0, repackPasses
		return
	}
	if progress {
		s.stalls = 0
		return
	}
	if s.stalls++; s.stalls < s.repackAfter {
		return
	}
	s.stalls = 0
	st := s.tbl.Stats()
	if !packable || st.BytesUsed+st.BytesReserved+need > st.BytesArea ||
		st.Keys+st.SlotsHeld+st.SlotsPending+len(s.missing) > st.KeyCapacity {
		return // too small for the data: only deletes help
	}
	s.repackAfter = min(2*s.repackAfter, maxRepackPasses)
	s.metrics.repacked()
	s.log.Warn("region cannot place missing keys in its fragmented free space; repacking it",
		"missing", len(s.missing), "need_bytes", need, "free_bytes", st.BytesFree, "largest_free", st.LargestFree)
	if err := s.rebuildLocked(); err != nil {
		s.log.Error("region repack failed; region stays incomplete and the rebuild is retried", "err", err)
	}
}

// compactLocked moves up to an eighth of the region's records out of the
// stretch of the record area where free space is most cut up by them, if
// it is (table.Compact); at most once per grace period.
func (s *Server) compactLocked() {
	if n := s.tbl.Compact(uint64(s.cfg.TableMem) / 8); n > 0 {
		s.log.Debug("table compacted", "bytes_moved", n)
	}
}
