package bench

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/bench/workload"
	"github.com/kvd-project/kvd/client"
)

func newRunner(t testing.TB, cfg Config, stores ...Store) *Runner {
	t.Helper()
	cfg.Stores = stores
	if cfg.Transport == "" {
		cfg.Transport = "fake"
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func small(mix workload.Mix) workload.Config {
	return workload.Config{Mix: mix, Keys: 500, KeySize: 8, ValueSize: 32}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no stores", Config{Transport: "tcp"}},
		{"nil store", Config{Transport: "tcp", Stores: []Store{nil}}},
		{"no transport", Config{Stores: []Store{newFake()}}},
	} {
		if _, err := New(tc.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	r := newRunner(t, Config{Transport: "tcp"}, newFake())
	if c := r.Config(); c.Series != "tcp" || c.Seed != DefaultSeed || c.PreloadWorkers != DefaultPreloadWorkers {
		t.Errorf("defaults not filled: %+v", c)
	}
	for _, tc := range []struct {
		name string
		p    Point
	}{
		{"open without rate", Point{Mode: Open}},
		{"too many clients", Point{Clients: MaxClients + 1}},
		{"value too large", Point{Workload: workload.Config{ValueSize: client.MaxValue + 1}}},
		{"bad workload", Point{Workload: workload.Config{Mix: 200}}},
	} {
		if _, err := r.Run(context.Background(), tc.p); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestPreload(t *testing.T) {
	f := newFake()
	r := newRunner(t, Config{PreloadWorkers: 7}, f)
	w := small(workload.ReadOnly)
	if err := r.Preload(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	if f.len() != w.Keys || f.puts.Load() != uint64(w.Keys) {
		t.Fatalf("preload wrote %d keys with %d puts, want %d", f.len(), f.puts.Load(), w.Keys)
	}
	if err := r.Preload(context.Background(), w); err != nil || f.puts.Load() != uint64(w.Keys) {
		t.Errorf("second preload of the same key space: %v, %d puts", err, f.puts.Load())
	}
	w.ValueSize = 64
	if err := r.Preload(context.Background(), w); err != nil || f.puts.Load() != uint64(2*w.Keys) {
		t.Errorf("preload of a new value size: %v, %d puts", err, f.puts.Load())
	}

	// A PUT that fails now and then is tried again (writing the same value
	// twice is harmless); one that keeps failing fails the preload.
	flaky := newFake()
	flaky.failPut = 10
	r = newRunner(t, Config{}, flaky)
	if err := r.Preload(context.Background(), w); err != nil || flaky.len() != w.Keys {
		t.Errorf("preload with a PUT in 10 failing: %v, %d of %d keys", err, flaky.len(), w.Keys)
	}
	bad := newFake()
	bad.failPut = 1
	r = newRunner(t, Config{}, bad)
	if err := r.Preload(context.Background(), w); !errors.Is(err, ErrPreload) || !errors.Is(err, errFake) {
		t.Errorf("failing preload: %v", err)
	}
}

// TestClosedLoop: a 95/5 mix against a preloaded fake runs the right mix,
// counts what it ran, and turns client counters and CPU into results.
func TestClosedLoop(t *testing.T) {
	f1 := newFake()
	f2 := f1.another()
	var progress int
	r := newRunner(t, Config{
		Transport: "tcp", Series: "s", ServerPIDs: []int{os.Getpid()}, ProgressEvery: time.Millisecond,
		Progress: func(p Progress) {
			progress++
			if p.Point == nil || p.Rate < 0 {
				t.Errorf("bad progress %+v", p)
			}
		},
	}, f1, f2)
	w := small(workload.ReadMost)
	if err := r.Preload(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	run, err := r.Run(context.Background(), Point{Workload: w, Clients: 4, Duration: 300 * time.Millisecond, Warmup: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if run.Ops < 1000 || run.Ops != run.Gets+run.Puts || run.Errors != 0 || run.Misses != 0 {
		t.Fatalf("ops %d = gets %d + puts %d, errors %d, misses %d", run.Ops, run.Gets, run.Puts, run.Errors, run.Misses)
	}
	if frac := float64(run.Gets) / float64(run.Ops); math.Abs(frac-0.95) > 0.02 {
		t.Errorf("GET fraction %.3f for a 95/5 mix", frac)
	}
	if run.Lat.Count != int64(run.Ops) || run.GetLat.Count != int64(run.Gets) || run.PutLat.Count != int64(run.Puts) {
		t.Errorf("histogram counts %d/%d/%d for %d/%d/%d ops", run.Lat.Count, run.GetLat.Count, run.PutLat.Count, run.Ops, run.Gets, run.Puts)
	}
	if run.Throughput <= 0 || math.Abs(run.Throughput-float64(run.Ops)/run.Seconds) > 1e-6*run.Throughput {
		t.Errorf("throughput %v for %d ops in %vs", run.Throughput, run.Ops, run.Seconds)
	}
	if x := run.RoundsPerGet(); math.Abs(x-2) > 0.01 {
		t.Errorf("round trips per GET %v, the fake does 2", x)
	}
	if x, y := run.ReadsPerOneSidedGet(), run.BytesPerOneSidedGet(); math.Abs(x-6) > 0.05 || math.Abs(y-700) > 5 {
		t.Errorf("%v READs and %v bytes per GET, the fake does 6 and 700", x, y)
	}
	if run.Retries == 0 || run.RetryReasons["torn"] != run.Retries {
		t.Errorf("retries %d %v", run.Retries, run.RetryReasons)
	}
	if run.Series != "s" || run.Transport != "tcp" || run.Mix != "95/5" || run.Clients != 4 || run.Conns != 2 || run.Mode != "closed" {
		t.Errorf("labels: %+v", run)
	}
	if run.ServerPIDs != 1 || run.ServerCPU <= 0 || math.Abs(run.ServerCPUPerOp-run.ServerCPU/float64(run.Ops)*1e6) > 1e-9 {
		t.Errorf("server CPU %vs, %vus/op over %d ops", run.ServerCPU, run.ServerCPUPerOp, run.Ops)
	}
	if run.ServerCPUNetPerOp != run.ServerCPUPerOp {
		t.Errorf("net CPU %v differs from gross %v with no idle rate", run.ServerCPUNetPerOp, run.ServerCPUPerOp)
	}
	if len(run.CDF) == 0 || run.CDF[len(run.CDF)-1].Us != run.Lat.Max {
		t.Errorf("CDF %v does not end at max %v", run.CDF, run.Lat.Max)
	}
	if progress == 0 {
		t.Error("progress hook never called")
	}
	// Both stores were used.
	if f1.gets.Load() == 0 || f2.gets.Load() == 0 {
		t.Errorf("store gets %d and %d: not shared round robin", f1.gets.Load(), f2.gets.Load())
	}
}

func TestErrorsMissesAndRPC(t *testing.T) {
	f := newFake()
	f.failPut, f.rpcGets = 3, true
	r := newRunner(t, Config{}, f)
	// Not preloaded, over a key space the run cannot fill: GETs miss (over
	// 500 keys the warmup's PUTs could write every one first, and a fast
	// run saw no miss). A third of PUTs fail.
	wl := small(workload.ReadHalf)
	wl.Keys = 1 << 20
	run, err := r.Run(context.Background(), Point{Workload: wl, Clients: 2, Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if run.Errors == 0 || run.Puts == 0 || run.PutLat.Count != int64(run.Puts) {
		t.Errorf("errors %d, puts %d, put latencies %d", run.Errors, run.Puts, run.PutLat.Count)
	}
	if ratio := float64(run.Errors) / float64(run.Errors+run.Puts); math.Abs(ratio-1.0/3) > 0.05 {
		t.Errorf("%.3f of PUTs failed, want 1/3", ratio)
	}
	if run.Misses == 0 || run.Misses > run.Gets {
		t.Errorf("misses %d of %d GETs", run.Misses, run.Gets)
	}
	if x := run.RoundsPerGet(); math.Abs(x-1) > 0.01 || run.OneSidedGets() != 0 {
		t.Errorf("RPC GETs: %v round trips per GET, %d one-sided", x, run.OneSidedGets())
	}
	if run.ServerPIDs != 0 || run.ServerCPU != 0 {
		t.Errorf("server CPU measured without PIDs: %+v", run)
	}
}

// TestOpenLoopSchedule: an open loop issues exactly the operations due in
// the measured window, and charges operations delayed by a stall with the
// time since they were due.
func TestOpenLoopSchedule(t *testing.T) {
	f := newFake()
	r := newRunner(t, Config{}, f)
	const rate = 1000
	p := Point{Workload: small(workload.ReadOnly), Mode: Open, Rate: rate, Clients: 1,
		Duration: 300 * time.Millisecond, Warmup: 10 * time.Millisecond}
	if err := r.Preload(context.Background(), p.Workload); err != nil {
		t.Fatal(err)
	}
	f.ops.Store(0)
	f.stall, f.stallAt = 100*time.Millisecond, 20
	run, err := r.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	// Due at k ms for k = 10..309: 300 operations.
	if run.Ops+run.Errors != 300 {
		t.Errorf("%d operations measured, 300 were due", run.Ops+run.Errors)
	}
	// About 100 operations fell due during the stall, each charged the
	// rest of it: well over a tenth of them waited 10 ms or more.
	if run.Lat.P90 < 10e3 || run.Lat.Max < 50e3 {
		t.Errorf("p90 %vus, max %vus: the stall did not show", run.Lat.P90, run.Lat.Max)
	}
	if run.Mode != "open" || run.TargetRate != rate {
		t.Errorf("labels: %+v", run)
	}
}

func TestCancel(t *testing.T) {
	r := newRunner(t, Config{}, newFake())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := r.Run(ctx, Point{Workload: small(workload.ReadOnly), Clients: 3, Duration: time.Hour}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
}

func TestSweep(t *testing.T) {
	s := Sweep{
		Base:          Point{Workload: workload.Config{Keys: 100000, KeySize: 16}, Duration: time.Second},
		ValueSizes:    []int{16, 65536},
		Mixes:         []workload.Mix{workload.ReadOnly, workload.WriteOnly},
		Consistencies: []client.Consistency{client.Linearizable, client.ReadIndex},
		Clients:       []int{1, 8},
		MaxData:       64 << 20,
	}
	ps := s.Points()
	// Per size: 100/0 x 2 consistencies x 2 clients + 0/100 x 1 x 2 = 6.
	if len(ps) != 12 {
		t.Fatalf("%d points", len(ps))
	}
	type key struct {
		vs      int
		mix     workload.Mix
		cons    client.Consistency
		clients int
	}
	want := []key{
		{16, 100, client.Linearizable, 1}, {16, 100, client.Linearizable, 8}, {16, 100, client.ReadIndex, 1},
		{16, 100, client.ReadIndex, 8}, {16, 0, client.Linearizable, 1}, {16, 0, client.Linearizable, 8},
	}
	for i, w := range want {
		p := ps[i]
		if got := (key{p.Workload.ValueSize, p.Workload.Mix, p.Consistency, p.Clients}); got != w || p.Duration != time.Second {
			t.Errorf("point %d = %+v, want %+v", i, got, w)
		}
	}
	// 16-byte values fit 100k keys; 64 KiB ones are capped to 64 MiB.
	if ps[0].Workload.Keys != 100000 || ps[0].Note != "" {
		t.Errorf("small values capped: %+v", ps[0])
	}
	big := ps[6].Workload
	if big.ValueSize != 65536 || big.Keys != int(64<<20/recordSize(16, 65536)) || ps[6].Note == "" {
		t.Errorf("large values not capped: keys %d note %q", big.Keys, ps[6].Note)
	}
	if n := len((Sweep{Base: Point{Clients: 3}}).Points()); n != 1 {
		t.Errorf("empty sweep has %d points", n)
	}
}

// TestOpAllocatesNothing: the harness's per-operation path (draw, issue,
// record) allocates nothing of its own.
func TestOpAllocatesNothing(t *testing.T) {
	f := newFake()
	r := newRunner(t, Config{}, f)
	p := Point{Workload: small(workload.ReadMost)}.withDefaults()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := r.Preload(context.Background(), p.Workload); err != nil {
		t.Fatal(err)
	}
	w := r.workersFor(&p)[0]
	ctx := context.Background()
	if n := testing.AllocsPerRun(2000, func() {
		op, idx := w.gen.Next()
		start := time.Now()
		ok, miss := w.do(ctx, op, w.gen.Key(idx))
		w.account(op, time.Since(start), ok, miss, true)
	}); n != 0 {
		t.Errorf("%v allocations per operation", n)
	}
}

func BenchmarkOp(b *testing.B) {
	f := newFake()
	r := newRunner(b, Config{}, f)
	p := Point{Workload: small(workload.ReadMost)}.withDefaults()
	if err := p.Validate(); err != nil {
		b.Fatal(err)
	}
	if err := r.Preload(context.Background(), p.Workload); err != nil {
		b.Fatal(err)
	}
	w := r.workersFor(&p)[0]
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		op, idx := w.gen.Next()
		start := time.Now()
		ok, miss := w.do(ctx, op, w.gen.Key(idx))
		w.account(op, time.Since(start), ok, miss, true)
	}
}

// TestProfileHook: Config.Profile is called as the measured part begins,
// with its length, its done after the part; an error from done fails the
// run.
func TestProfileHook(t *testing.T) {
	var calls, dones int
	var got time.Duration
	fail := false
	r := newRunner(t, Config{Profile: func(p *Point, d time.Duration) func() error {
		calls++
		got = d
		return func() error {
			dones++
			if fail {
				return errors.New("no profile")
			}
			return nil
		}
	}}, newFake())
	p := Point{Workload: small(workload.ReadMost), Duration: 50 * time.Millisecond, Warmup: 10 * time.Millisecond}
	if _, err := r.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || dones != 1 || got != p.Duration {
		t.Fatalf("%d calls, %d dones, d = %v; want 1, 1, %v", calls, dones, got, p.Duration)
	}
	fail = true
	if _, err := r.Run(context.Background(), p); err == nil || !strings.Contains(err.Error(), "no profile") {
		t.Fatalf("a failed profile: err = %v", err)
	}
}
