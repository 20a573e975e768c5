package server

import (
	"errors"
	"time"

	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/monoclock"
	"github.com/kvd-project/kvd/internal/table"
)

// applier receives the Raft node's applied writes and keeps the table region
// equal to them. Its methods run on the node's apply goroutine.
type applier Server

// Apply mirrors one committed and durably applied batch into the region,
// under the table lock as a whole: RPC reads, which take the same lock,
// see the region only at batch boundaries, never ahead of or behind it
// within a batch (see get in handler.go).
func (a *applier) Apply(ws []kv.Write) {
	s := (*Server)(a)
	if hook := s.cfg.Knobs.BeforeApply; hook != nil {
		hook(ws)
	}
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if len(ws) > 0 && ws[0].Atomic {
		s.applyAtomicLocked(ws) // a transaction: one-sided readers see all of it or none (atomic.go)
	} else {
		for _, w := range ws {
			s.applyLocked(w.Version, w.Key, w.Value, w.Deleted)
		}
	}
	s.caughtUpLocked()
	s.maybeCompleteLocked()
}

// The region may lack keys the node holds: a write it could not fit, or a
// rebuild that ran out of space or failed. Then the header's incomplete
// flag is set (before anything is removed, so no reader trusts a miss
// meanwhile), and the keys are remembered so repairLoop can put them back
// and clear it. Everything the region does show is current, so hits stay
// trustworthy. A held key's slot is cleared only once the flag has been
// set for a grace period (table.Evict, Reset: rule M4 of
// docs/layout.md), so that no GET that read the flag clear can miss it.

func (s *Server) applyLocked(version uint64, key, value []byte, deleted bool) {
	if deleted {
		s.forgetMissing(string(key))
		if _, err := s.tbl.Delete(key); err != nil {
			s.log.Error("table delete failed", "err", err)
		}
		return
	}
	err := s.tbl.Put(key, value, version)
	if err == nil {
		s.forgetMissing(string(key))
		return
	}
	// The write is durable and committed, but the region cannot hold it
	// now. On the leader that only happens for a write it did not admit
	// itself (table.Reserve holds room for those); a follower's region
	// differs from the leader's (placement, fragmentation, limbo timing),
	// and a follower never refuses what the leader admitted.
	s.metrics.applyMissed()
	s.log.Warn("table cannot hold an applied write; region marked incomplete until repaired",
		"key_len", len(key), "value_len", len(value), "err", err)
	s.tbl.Evict(key) // flags the region; the old value's record dead at once, its slot kept for a grace period
	s.noteMissing(key, len(value))
	s.compactLocked() // if free space is cut up, the repair finds it whole a grace period from now
}

// noteMissing remembers key, whose value is valueLen bytes, as applied but
// not in the region. Admission counts the room its record needs
// (reserveLocked): a fresh region of the same size must hold it too.
func (s *Server) noteMissing(key []byte, valueLen int) {
	n := table.RecordLen(len(key), valueLen)
	s.missingBytes += n - s.missing[string(key)] // noted again: the new length
	s.missing[string(key)] = n
}

// forgetMissing drops key from the missing keys, if it is one.
func (s *Server) forgetMissing(key string) {
	if n, ok := s.missing[key]; ok {
		s.missingBytes -= n
		delete(s.missing, key)
	}
}

// maybeCompleteLocked clears the incomplete flag once nothing is missing.
// It runs only at batch boundaries: cleared in the middle of a batch, the
// flag would let a reader trust a miss for a key a later write of the same
// batch is about to add. The table may refuse for up to a grace period
// (rules M3 and M4, table.CompleteIn); the next batch, or repairLoop's next
// tick a grace period from now at most, asks again.
func (s *Server) maybeCompleteLocked() {
	if len(s.missing) == 0 && !s.rebuilding && !s.rebuildFailed && s.tbl.Header().Incomplete {
		s.tbl.SetIncomplete(false)
	}
}

// Restore rebuilds the region after the node installed a snapshot.
func (a *applier) Restore() {
	s := (*Server)(a)
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if err := s.rebuildLocked(); err != nil {
		s.log.Error("rebuild after snapshot failed; region stays incomplete and the rebuild is retried", "err", err)
		return
	}
	if n := len(s.missing); n > 0 {
		s.log.Warn("rebuild after snapshot could not place every key yet; repairing as space frees", "missing", n)
	}
}

// rebuildLocked refills the table from the node's applied state
// (docs/layout.md, "Inline records", Rebuild). The lease word
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
// Keys that still do not fit (a smaller --table-mem than the data needs,
// or a leader that admitted more than this node can hold) are left to
// repairLoop, which puts them back with everyday Puts after Reveal. If
// the walk fails, the region stays flagged incomplete and hidden (it is
// partial; reads go by RPC) and repairLoop runs the rebuild again, whose
// Reset marks the hidden records dead like any others.
func (s *Server) rebuildLocked() error {
	s.setRebuilding(true)
	s.tbl.Reset()
	s.waitLocked(s.tbl.PendingClearsIn(), "the old contents' slots to clear")
	s.waitLocked(s.tbl.ArenaLimboClearsIn(), "the arenas' limbo to drain")
	clear(s.missing)
	s.missingBytes = 0
	forEach := s.kv.ForEach
	if s.testForEach != nil {
		forEach = s.testForEach
	}
	s.waitForRoomLocked(forEach)
	err := forEach(func(key, value []byte, version uint64) error {
		err := s.tbl.Put(key, value, version)
		if errors.Is(err, table.ErrNoSpace) {
			s.noteMissing(key, len(value))
			return nil
		}
		return err
	})
	if err == nil {
		s.waitLocked(s.tbl.RevealIn(), "the rebuild's freed arena bytes to age")
		err = s.tbl.Reveal() // ErrTooEarly only if the wait was cut short (the server stops)
	}
	s.rebuildFailed = err != nil
	s.setRebuilding(false)
	s.maybeCompleteLocked()
	return err
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
func (s *Server) waitForRoomLocked(forEach func(fn func(key, value []byte, version uint64) error) error) {
	d := s.tbl.LimboClearsIn()
	if d == 0 {
		return
	}
	var need uint64
	if err := forEach(func(key, value []byte, _ uint64) error {
		if !s.tbl.FitsInline(len(key), len(value)) {
			need += table.RecordLen(len(key), len(value))
		}
		return nil
	}); err != nil {
		return // the rebuild's own walk meets it
	}
	if need <= s.tbl.Stats().LargestFree {
		return
	}
	s.waitLocked(d, "the old contents' space to leave limbo", "bytes", need)
}

// waitLocked waits d, holding the table lock (it runs on the apply path,
// as the rest of a rebuild does), or until the server stops.
func (s *Server) waitLocked(d time.Duration, what string, args ...any) {
	if d <= 0 {
		return
	}
	s.log.Info("rebuild waits for "+what, append([]any{"wait", d}, args...)...)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.ctx.Done():
	}
}

// onLease is the node's lease callback, called from the raft loop. It takes
// only leaseMu, never the table lock, so that publishing (or ending) the
// lease never waits behind an apply, a rebuild or a repair pass.
func (s *Server) onLease(term uint64, expiry time.Time) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	s.leaseTerm, s.leaseExpiry = term, expiry
	s.publishLeaseLocked()
}

// setRebuilding withholds the lease while the region is rebuilt (from new
// readers: an expiry a client cached before still holds, see rebuildLocked).
func (s *Server) setRebuilding(on bool) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	s.rebuilding = on
	s.publishLeaseLocked()
}

func (s *Server) publishLeaseLocked() {
	var w uint64
	if !s.rebuilding && !s.leaseExpiry.IsZero() {
		w = uint64(monoclock.At(s.leaseExpiry))
	}
	s.tbl.SetLease(w)
	if s.metrics != nil {
		s.metrics.leaseChanged(w != 0)
	}
}
