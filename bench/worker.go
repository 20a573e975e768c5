package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/bench/latency"
	"github.com/kvd-project/kvd/bench/workload"
	"github.com/kvd-project/kvd/client"
)

// Run phases, as closed-loop workers see them when they start an operation.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// worker is one goroutine's state. Recorders are kept across points (they
// are large); everything else is reset by prepare.
type worker struct {
	store Store
	opts  []client.ReadOption
	gen   *workload.Generator
	get   *latency.Recorder
	put   *latency.Recorder

	// Measured operations, read after the point ends. A CAS counts as a
	// PUT; conflicts are the CASes whose condition failed (answers, not
	// errors).
	gets, puts, errs, misses, conflicts uint64
	// scans (counted in gets too: they are reads) and the keys they
	// returned; scanned holds the last scan's count until it is accounted.
	scans, scanKeys, scanned uint64
	// Every completed operation and error, warmup included, for progress.
	done, failed atomic.Uint64
}

func newWorker() *worker {
	return &worker{get: latency.New(), put: latency.New()}
}

func (w *worker) prepare(store Store, p *Point, seed, stream uint64) {
	w.store = store
	w.opts = []client.ReadOption{client.WithConsistency(p.Consistency)}
	w.gen = workload.New(p.Workload, seed, stream)
	w.get.Reset()
	w.put.Reset()
	w.gets, w.puts, w.errs, w.misses, w.conflicts = 0, 0, 0, 0, 0
	w.scans, w.scanKeys, w.scanned = 0, 0, 0
	w.done.Store(0)
	w.failed.Store(0)
}

// do issues one operation; it reports whether it succeeded (a GET of a
// missing key succeeds: it is an answer, counted as a miss; so does a CAS
// whose condition failed, counted as a conflict: miss for a CAS).
func (w *worker) do(ctx context.Context, op workload.Op, key []byte) (ok, miss bool) {
	var err error
	switch op {
	case workload.Get:
		_, err = w.store.Get(ctx, key, w.opts...)
		if errors.Is(err, client.ErrNotFound) {
			return true, true
		}
	case workload.CAS:
		return w.cas(ctx, key)
	case workload.Scan:
		var n int
		n, err = w.store.Scan(ctx, key, w.gen.ScanLen(), w.opts...)
		w.scanned = uint64(n)
	default:
		err = w.store.Put(ctx, key, w.gen.Value())
	}
	return err == nil, false
}

// cas reads key's version (0: absent) and writes it back on condition that
// it is still that version.
func (w *worker) cas(ctx context.Context, key []byte) (ok, conflict bool) {
	_, ver, err := w.store.GetModRevision(ctx, key, w.opts...)
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		return false, false
	}
	err = w.store.CompareAndSwap(ctx, key, w.gen.Value(), ver)
	if errors.Is(err, client.ErrConflict) {
		return true, true
	}
	return err == nil, false
}

// account records one finished operation.
func (w *worker) account(op workload.Op, lat time.Duration, ok, miss, measured bool) {
	w.done.Add(1)
	if !ok {
		w.failed.Add(1)
	}
	if !measured {
		return
	}
	switch {
	case !ok:
		w.errs++
	case op == workload.Get || op == workload.Scan:
		w.gets++
		w.get.Record(lat)
		if miss {
			w.misses++
		}
		if op == workload.Scan {
			w.scans++
			w.scanKeys += w.scanned
		}
	default:
		w.puts++
		w.put.Record(lat)
		if op == workload.CAS && miss {
			w.conflicts++
		}
	}
}

// closedLoop issues operations back to back until the phase is stop.
func (w *worker) closedLoop(ctx context.Context, phase *atomic.Int32) {
	for ctx.Err() == nil {
		ph := phase.Load()
		if ph == phaseStop {
			return
		}
		op, idx := w.gen.Next()
		key := w.gen.Key(idx)
		start := time.Now()
		ok, miss := w.do(ctx, op, key)
		w.account(op, time.Since(start), ok, miss, ph == phaseMeasure)
	}
}

// schedule is an open loop's timetable: operation k is due at start +
// k*interval; those due before measureFrom are warmup, none is due at or
// after end.
type schedule struct {
	start       time.Time
	interval    float64 // nanoseconds
	measureFrom time.Time
	end         time.Time
	next        atomic.Int64
}

func (s *schedule) due(k int64) time.Time {
	return s.start.Add(time.Duration(float64(k) * s.interval))
}

// openLoop takes the next due operation, waits for its time if it is early,
// and charges it the time since it was due. A worker that falls behind
// issues late operations at once, so queueing shows in the latencies.
func (w *worker) openLoop(ctx context.Context, s *schedule) {
	for ctx.Err() == nil {
		due := s.due(s.next.Add(1) - 1)
		if !due.Before(s.end) {
			return
		}
		sleepUntil(ctx, due)
		op, idx := w.gen.Next()
		key := w.gen.Key(idx)
		ok, miss := w.do(ctx, op, key)
		w.account(op, time.Since(due), ok, miss, !due.Before(s.measureFrom))
	}
}

// sleepUntil waits until t, or less if ctx ends. It sleeps in slices
// rather than selecting on a timer so that waiting allocates nothing.
func sleepUntil(ctx context.Context, t time.Time) {
	const slice = 20 * time.Millisecond
	for ctx.Err() == nil {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		time.Sleep(min(d, slice))
	}
}
