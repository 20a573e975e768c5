package server

import (
	"errors"
	"time"

	"github.com/kvd-project/kvd/internal/table"
)

// applier receives the Raft node's applied writes and keeps the table region
// equal to them. Its methods run on the node's apply goroutine.
type applier Server

// Apply mirrors one committed and durably applied write into the region.
func (a *applier) Apply(version uint64, key, value []byte, deleted bool) {
	s := (*Server)(a)
	s.tmu.Lock()
	defer s.tmu.Unlock()
	s.applyLocked(version, key, value, deleted)
}

// The region may lack keys the node holds: a write it could not fit, or a
// rebuild that ran out of space. Then the header's incomplete flag is set
// (before anything is removed, so no reader trusts a miss meanwhile), and
// the keys are remembered so repairLoop can put them back and clear it.
// Everything the region does show is current, so hits stay trustworthy.

func (s *Server) applyLocked(version uint64, key, value []byte, deleted bool) {
	if deleted {
		delete(s.missing, string(key))
		if _, err := s.tbl.Delete(key); err != nil {
			s.log.Error("table delete failed", "err", err)
		}
		s.maybeCompleteLocked()
		return
	}
	err := s.tbl.Put(key, value, version)
	if err == nil {
		delete(s.missing, string(key))
		s.maybeCompleteLocked()
		return
	}
	// The write is durable and committed, but the region cannot hold it
	// now (its space differs from the leader's, or it is fragmented).
	s.log.Warn("table cannot hold an applied write; region marked incomplete until repaired",
		"key_len", len(key), "value_len", len(value), "err", err)
	s.tbl.SetIncomplete(true)
	if _, derr := s.tbl.Delete(key); derr != nil {
		s.log.Error("table delete failed", "err", derr)
	}
	s.missing[string(key)] = struct{}{}
}

// maybeCompleteLocked clears the incomplete flag once nothing is missing.
func (s *Server) maybeCompleteLocked() {
	if len(s.missing) == 0 && !s.rebuilding && s.tbl.Header().Incomplete {
		s.tbl.SetIncomplete(false)
	}
}

// Restore rebuilds the region after the node installed a snapshot.
func (a *applier) Restore() {
	s := (*Server)(a)
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if err := s.rebuildLocked(); err != nil {
		s.log.Error("rebuild after snapshot failed", "err", err)
		return
	}
	if n := len(s.missing); n > 0 {
		s.log.Warn("rebuild after snapshot could not place every key yet; repairing as space frees", "missing", n)
	}
}

// rebuildLocked refills the table from the node's applied state. The lease
// word stays clear until it is done, so no linearizable reader accepts a
// half-built region; the incomplete flag is raised before the old contents
// go, so no serializable reader trusts a miss. Keys that do not fit (the old
// generation's space is reusable only after the grace period) are left to
// repairLoop.
func (s *Server) rebuildLocked() error {
	s.rebuilding = true
	s.publishLeaseLocked()
	s.tbl.SetIncomplete(true)
	s.tbl.Reset()
	clear(s.missing)
	err := s.node.ForEach(func(key, value []byte, version uint64) error {
		err := s.tbl.Put(key, value, version)
		if errors.Is(err, table.ErrNoSpace) {
			s.missing[string(key)] = struct{}{}
			return nil
		}
		return err
	})
	s.rebuilding = false
	s.maybeCompleteLocked()
	s.publishLeaseLocked()
	return err
}

// repairLoop puts back what the region could not hold, once space allows,
// and keeps the header's leader hint current.
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
		leader := s.node.Status().LeaderID
		s.tmu.Lock()
		s.tbl.SetLeaderHint(leader)
		s.repairLocked()
		s.tmu.Unlock()
	}
}

func (s *Server) repairLocked() {
	for k := range s.missing {
		value, version, ok, err := s.node.Get([]byte(k))
		switch {
		case err != nil:
			return
		case !ok:
			delete(s.missing, k)
		case s.tbl.Put([]byte(k), value, version) == nil:
			delete(s.missing, k)
		}
	}
	s.maybeCompleteLocked()
}

// onLease is the node's lease callback.
func (s *Server) onLease(term uint64, valid bool) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	s.leaseTerm, s.leaseValid = term, valid
	s.publishLeaseLocked()
}

func (s *Server) publishLeaseLocked() {
	s.tbl.SetLease(s.leaseTerm, s.leaseValid && !s.rebuilding)
	if s.metrics != nil {
		s.metrics.leaseChanged(s.leaseValid && !s.rebuilding)
	}
}
