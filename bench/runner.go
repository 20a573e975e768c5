package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/bench/latency"
	"github.com/kvd-project/kvd/bench/procstat"
	"github.com/kvd-project/kvd/bench/result"
	"github.com/kvd-project/kvd/client"
)

// Runner measures points against one cluster. Its methods must not be
// called concurrently: each point has the cluster to itself.
type Runner struct {
	cfg       Config
	workers   []*worker
	all       *latency.Recorder // scratch for merging
	get       *latency.Recorder
	put       *latency.Recorder
	points    uint64 // points run, to give each its own random streams
	preloaded loaded
}

// New returns a Runner for cfg.
func New(cfg Config) (*Runner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, all: latency.New(), get: latency.New(), put: latency.New()}, nil
}

// Config returns the runner's configuration, defaults filled in.
func (r *Runner) Config() Config { return r.cfg }

// workersFor returns p.Clients workers prepared for p, sharing the stores
// round robin.
func (r *Runner) workersFor(p *Point) []*worker {
	for len(r.workers) < p.Clients {
		r.workers = append(r.workers, newWorker())
	}
	ws := r.workers[:p.Clients]
	r.points++
	for i, w := range ws {
		w.prepare(r.cfg.Stores[i%len(r.cfg.Stores)], p, r.cfg.Seed, r.points*MaxClients+uint64(i))
	}
	return ws
}

// clientStats sums the stores' counters.
func (r *Runner) clientStats() client.Stats {
	sum := client.Stats{Retries: map[string]uint64{}}
	for _, s := range r.cfg.Stores {
		st := s.Stats()
		sum.Gets += st.Gets
		sum.OneSided += st.OneSided
		sum.OneSidedRounds += st.OneSidedRounds
		sum.OneSidedReads += st.OneSidedReads
		sum.OneSidedBytes += st.OneSidedBytes
		sum.RPCGets += st.RPCGets
		sum.Fallbacks += st.Fallbacks
		for k, v := range st.Retries {
			sum.Retries[k] += v
		}
	}
	return sum
}

// serverCPU is the servers' total CPU time, or 0 without server PIDs.
func (r *Runner) serverCPU() (time.Duration, error) {
	if len(r.cfg.ServerPIDs) == 0 {
		return 0, nil
	}
	return procstat.Total(r.cfg.ServerPIDs)
}

// IdleCPU measures the servers' CPU use over d with no load, in cores.
func (r *Runner) IdleCPU(ctx context.Context, d time.Duration) (float64, error) {
	if len(r.cfg.ServerPIDs) == 0 || d <= 0 {
		return 0, nil
	}
	c0, err := r.serverCPU()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	sleepUntil(ctx, t0.Add(d))
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c1, err := r.serverCPU()
	if err != nil {
		return 0, err
	}
	return (c1 - c0).Seconds() / time.Since(t0).Seconds(), nil
}

// SetIdleCPU records the idle rate later runs are netted against.
func (r *Runner) SetIdleCPU(cores float64) { r.cfg.IdleServerCPU = cores }

// window is what the coordinator observed around the measured part.
// window is a point's measured part: from t0 to end (when no operation
// may start any more: the operations counted are those started in it, so
// throughput is over t0..end), and to t1 once the last of them finished
// (the servers' CPU, read after them, is over t0..t1).
type window struct {
	t0, end, t1 time.Time
	cpu0, cpu1  time.Duration
	st0, st1    client.Stats
}

// Run measures one point. The key space must have been preloaded (Preload)
// for GETs to find their keys; misses are counted, not failed.
func (r *Runner) Run(ctx context.Context, p Point) (result.Run, error) {
	p = p.withDefaults()
	if err := p.Validate(); err != nil {
		return result.Run{}, err
	}
	ws := r.workersFor(&p)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	start := time.Now()
	measureFrom := start.Add(p.Warmup)
	end := measureFrom.Add(p.Duration)
	var phase atomic.Int32
	var wg sync.WaitGroup
	sched := &schedule{start: start, measureFrom: measureFrom, end: end}
	if p.Mode == Open {
		sched.interval = 1e9 / p.Rate
	}
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.Mode == Open {
				w.openLoop(ctx, sched)
			} else {
				w.closedLoop(ctx, &phase)
			}
		}()
	}
	stopProgress := r.reportProgress(ctx, &p, ws, measureFrom)

	win, err := r.coordinate(ctx, &p, measureFrom, end, &phase, &wg)
	stopProgress()
	if err != nil {
		cancel()
		wg.Wait()
		return result.Run{}, err
	}
	return r.collect(&p, ws, win), nil
}

// coordinate snapshots counters when the measured part begins, stops the
// closed loop at its end, waits for every worker, and snapshots again.
func (r *Runner) coordinate(ctx context.Context, p *Point, from, end time.Time, phase *atomic.Int32, wg *sync.WaitGroup) (w window, err error) {
	sleepUntil(ctx, from)
	if r.cfg.Profile != nil {
		done := r.cfg.Profile(p, end.Sub(from))
		defer func() {
			if perr := done(); perr != nil && err == nil {
				err = fmt.Errorf("profile: %w", perr)
			}
		}()
	}
	if w.cpu0, err = r.serverCPU(); err != nil {
		return w, fmt.Errorf("server CPU: %w", err)
	}
	w.st0, w.t0 = r.clientStats(), time.Now()
	phase.Store(phaseMeasure)
	sleepUntil(ctx, end)
	w.end = time.Now()
	phase.Store(phaseStop)
	wg.Wait()
	w.t1 = time.Now()
	if err := ctx.Err(); err != nil {
		return w, err
	}
	w.st1 = r.clientStats()
	if w.cpu1, err = r.serverCPU(); err != nil {
		return w, fmt.Errorf("server CPU: %w", err)
	}
	return w, nil
}

// reportProgress calls the Progress hook every ProgressEvery until the
// returned function is called.
func (r *Runner) reportProgress(ctx context.Context, p *Point, ws []*worker, measureFrom time.Time) func() {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.cfg.ProgressEvery)
		defer t.Stop()
		var lastOps uint64
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				now := time.Now()
				var ops, errs uint64
				for _, w := range ws {
					ops += w.done.Load()
					errs += w.failed.Load()
				}
				rate := float64(ops-lastOps) / now.Sub(last).Seconds()
				lastOps, last = ops, now
				r.cfg.Progress(Progress{Point: p, Elapsed: now.Sub(measureFrom), Ops: ops, Errors: errs, Rate: rate})
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// collect merges the workers' measurements into a result.
func (r *Runner) collect(p *Point, ws []*worker, win window) result.Run {
	r.all.Reset()
	r.get.Reset()
	r.put.Reset()
	out := result.Run{
		Series: r.cfg.Series, Transport: r.cfg.Transport,
		Mix: p.Workload.Mix.String(), ReadPct: int(p.Workload.Mix), Consistency: p.Consistency.String(),
		Dist: p.Workload.Dist.String(), Keys: p.Workload.Keys, KeySize: p.Workload.KeySize, ValueSize: p.Workload.ValueSize,
		Mode: p.Mode.String(), Clients: p.Clients, Conns: min(p.Clients, len(r.cfg.Stores)), TargetRate: p.Rate,
		Seconds: win.end.Sub(win.t0).Seconds(), Note: p.Note,
	}
	for _, w := range ws {
		r.get.Merge(w.get)
		r.put.Merge(w.put)
		out.Gets += w.gets
		out.Puts += w.puts
		out.Errors += w.errs
		out.Misses += w.misses
		out.Conflicts += w.conflicts
		out.Scans += w.scans
		out.ScanKeys += w.scanKeys
	}
	r.all.Merge(r.get)
	r.all.Merge(r.put)
	out.Ops = out.Gets + out.Puts
	if out.Seconds > 0 {
		out.Throughput = float64(out.Ops) / out.Seconds
	}
	out.Lat, out.GetLat, out.PutLat, out.CDF = r.all.Summary(), r.get.Summary(), r.put.Summary(), r.all.CDF()

	out.OneSidedRounds = win.st1.OneSidedRounds - win.st0.OneSidedRounds
	out.OneSidedReads = win.st1.OneSidedReads - win.st0.OneSidedReads
	out.OneSidedBytes = win.st1.OneSidedBytes - win.st0.OneSidedBytes
	out.RPCGets = win.st1.RPCGets - win.st0.RPCGets
	out.Fallbacks = win.st1.Fallbacks - win.st0.Fallbacks
	for k, v := range win.st1.Retries {
		if d := v - win.st0.Retries[k]; d > 0 {
			if out.RetryReasons == nil {
				out.RetryReasons = map[string]uint64{}
			}
			out.RetryReasons[k] = d
			out.Retries += d
		}
	}
	out.ClientGets = win.st1.Gets - win.st0.Gets
	out.OneSided = win.st1.OneSided - win.st0.OneSided

	if n := len(r.cfg.ServerPIDs); n > 0 {
		out.ServerPIDs = n
		cpu := (win.cpu1 - win.cpu0).Seconds()
		out.ServerCPU = cpu
		if out.Ops > 0 {
			out.ServerCPUPerOp = cpu / float64(out.Ops) * 1e6
			net := max(0, cpu-r.cfg.IdleServerCPU*win.t1.Sub(win.t0).Seconds())
			out.ServerCPUNetPerOp = net / float64(out.Ops) * 1e6
		}
	}
	return out
}
