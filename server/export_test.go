package server

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvd-project/kvd/internal/mirror"
)

// HoldTable takes the table lock, as a long repair pass, a rebuild or a
// metrics scrape would, and returns its release. For tests.
func HoldTable(s *Server) (release func()) { return s.mirror.Hold() }

// Faults drives the mirror knobs (Config.Knobs.Mirror) of the servers it
// is given to, at any time while they run.
type Faults struct {
	pause atomic.Bool
	walk  atomic.Pointer[func(i int) error]
	step  atomic.Pointer[func(step string)]
}

// KnobsFor is the knobs to start a server with (any id: kvdtest.Options.Knobs).
func (f *Faults) KnobsFor(uint64) Knobs {
	return Knobs{Mirror: mirror.Knobs{
		PauseRepair: f.pause.Load,
		WalkKey: func(i int) error {
			if fn := f.walk.Load(); fn != nil {
				return (*fn)(i)
			}
			return nil
		},
		AtomicStep: func(step string) {
			if fn := f.step.Load(); fn != nil {
				(*fn)(step)
			}
		},
	}}
}

// FailRebuilds makes every later region rebuild fail after n keys (n < 0:
// rebuilds work again, and are no longer slowed).
func (f *Faults) FailRebuilds(n int) {
	if n < 0 {
		f.walk.Store(nil)
		return
	}
	fail := func(i int) error {
		if i == n {
			return errInjected
		}
		return nil
	}
	f.walk.Store(&fail)
}

var errInjected = errors.New("injected rebuild failure")

// SlowRebuilds makes every later region rebuild pause d before each key,
// so that readers meet the region half-built (and no longer fail).
func (f *Faults) SlowRebuilds(d time.Duration) {
	slow := func(int) error {
		time.Sleep(d)
		return nil
	}
	f.walk.Store(&slow)
}

// PauseRepair stops the repair loop's passes until resume.
func (f *Faults) PauseRepair() (resume func()) {
	f.pause.Store(true)
	return func() { f.pause.Store(false) }
}

// OnAtomicStep runs fn (nil: nothing) after each step of an atomic apply,
// under the table lock.
func (f *Faults) OnAtomicStep(fn func(step string)) {
	if fn == nil {
		f.step.Store(nil)
		return
	}
	f.step.Store(&fn)
}

// Rebuild runs the rebuild a snapshot install triggers.
func Rebuild(s *Server) { s.mirror.Restore() }

// CompleteIn is how long until the table lets the incomplete flag clear
// (table.CompleteIn); the repair loop clears it within a grace period
// after that, if nothing is missing.
func CompleteIn(s *Server) time.Duration { return s.mirror.CompleteIn() }

// LeaseCount is how many TTL leases the node has applied.
func LeaseCount(s *Server) int { return s.kv.LeaseCount() }

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

// MissKey drops key from the region as an applied write the region could
// not hold does: the region flagged incomplete, the key left to the repair
// loop.
func MissKey(s *Server, key []byte) {
	if err := s.mirror.Evict(key); err != nil {
		panic(err)
	}
}

// HoldSnapshotSlots takes every backup stream slot, as streams in progress
// would, and returns their release. For tests.
func HoldSnapshotSlots(s *Server) (release func()) {
	for range MaxSnapshotStreams {
		if !s.snapSlots.tryAcquire() {
			panic("snapshot slot taken")
		}
	}
	return func() {
		for range MaxSnapshotStreams {
			select { // never blocks, even when a broken limit let a stream take none
			case <-s.snapSlots.ch:
			default:
			}
		}
	}
}

// SnapshotStreams is kvd_snapshot_streams_total{outcome}.
func SnapshotStreams(s *Server, outcome string) float64 {
	return testutil.ToFloat64(s.metrics.snapshots.WithLabelValues(outcome))
}
