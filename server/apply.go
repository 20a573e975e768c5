package server

import (
	"errors"
	"fmt"

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

func (s *Server) applyLocked(version uint64, key, value []byte, deleted bool) {
	if deleted {
		if _, err := s.tbl.Delete(key); err != nil {
			s.log.Error("table delete failed", "key", key, "err", err)
		}
		return
	}
	err := s.tbl.Put(key, value, version)
	if err == nil {
		return
	}
	// The write is durable and committed, but the region cannot hold it
	// (its space differs from the leader's, or it is fragmented). Drop the
	// key's old value so no reader can see it, and flag the region as
	// incomplete so readers ask by RPC when they miss.
	s.log.Warn("table cannot hold an applied write; region marked incomplete", "key_len", len(key),
		"value_len", len(value), "err", err)
	if _, derr := s.tbl.Delete(key); derr != nil {
		s.log.Error("table delete failed", "err", derr)
	}
	s.tbl.SetIncomplete(true)
}

// Restore rebuilds the region after the node installed a snapshot.
func (a *applier) Restore() {
	s := (*Server)(a)
	s.tmu.Lock()
	defer s.tmu.Unlock()
	s.rebuilding = true
	s.publishLeaseLocked()
	if err := s.rebuildLocked(); err != nil {
		s.log.Error("rebuild after snapshot failed; region stays marked incomplete", "err", err)
	}
}

// rebuildLocked refills the table from the node's applied state. The lease
// word stays clear until it is done, so no linearizable reader accepts a
// half-built region.
func (s *Server) rebuildLocked() error {
	s.tbl.Reset()
	s.tbl.SetIncomplete(true)
	err := s.node.ForEach(func(key, value []byte, version uint64) error {
		err := s.tbl.Put(key, value, version)
		if errors.Is(err, table.ErrNoSpace) {
			return fmt.Errorf("server: table memory too small for the stored data (%d keys loaded): %w", s.tbl.Len(), err)
		}
		return err
	})
	if err != nil {
		return err
	}
	s.tbl.SetIncomplete(false)
	s.rebuilding = false
	s.publishLeaseLocked()
	return nil
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
