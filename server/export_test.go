package server

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HoldTable takes the table lock, as a long repair pass, a rebuild or a
// metrics scrape would, and returns its release. For tests.
func HoldTable(s *Server) (release func()) {
	s.tmu.Lock()
	return s.tmu.Unlock
}

// FailRebuilds makes every later region rebuild fail after n keys (n < 0:
// rebuilds work again), and Rebuild runs one as a snapshot install would.
func FailRebuilds(s *Server, n int) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if n < 0 {
		s.testForEach = nil
		return
	}
	s.testForEach = func(fn func(key, value []byte, version uint64) error) error {
		i := 0
		return s.node.ForEach(func(key, value []byte, version uint64) error {
			if i == n {
				return errInjected
			}
			i++
			return fn(key, value, version)
		})
	}
}

var errInjected = errors.New("injected rebuild failure")

// Rebuild runs the rebuild a snapshot install triggers.
func Rebuild(s *Server) { (*applier)(s).Restore() }

// CompleteIn is how long until the table lets the incomplete flag clear
// (table.CompleteIn); the repair loop clears it within a grace period
// after that, if nothing is missing.
func CompleteIn(s *Server) time.Duration {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	return s.tbl.CompleteIn()
}

// SlowRebuilds makes every later region rebuild pause d after each key, so
// that readers meet the region half-built.
func SlowRebuilds(s *Server, d time.Duration) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	s.testForEach = func(fn func(key, value []byte, version uint64) error) error {
		return s.node.ForEach(func(key, value []byte, version uint64) error {
			time.Sleep(d)
			return fn(key, value, version)
		})
	}
}

// LeaseCount is how many TTL leases the node has applied.
func LeaseCount(s *Server) int { return s.node.LeaseCount() }

// Gauge is what the server's gauge (or counter) name shows now (gathered from its own
// collectors, so a test needs no registry).
func Gauge(s *Server, name string) (float64, bool) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.metrics.cs...)
	mfs, err := reg.Gather()
	if err != nil {
		return 0, false
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		switch m := mf.GetMetric()[0]; {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// PauseRepair stops the repair loop's passes until resume.
func PauseRepair(s *Server) (resume func()) {
	s.testPauseRepair.Store(true)
	return func() { s.testPauseRepair.Store(false) }
}

// MissKey drops key from the region as an applied write the region could
// not hold does (applyLocked): the region flagged incomplete, the key left
// to the repair loop.
func MissKey(s *Server, key []byte) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	s.tbl.Evict(key)
	missLocked(s, key)
}

// missLocked notes key as missing, with its value's length from Pebble.
func missLocked(s *Server, key []byte) {
	value, _, _, err := s.node.Get(key)
	if err != nil {
		panic(err)
	}
	s.noteMissing(key, len(value))
}
