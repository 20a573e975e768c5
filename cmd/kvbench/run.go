package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvd-project/kvd/bench"
	"github.com/kvd-project/kvd/bench/cluster"
	"github.com/kvd-project/kvd/bench/result"
	"github.com/kvd-project/kvd/bench/workload"
	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/cli"
	"github.com/kvd-project/kvd/transport"
)

type runOptions struct {
	// Cluster.
	endpoints, transport, series, serverPIDs string
	startCluster                             int
	bin, host                                string
	tableMem                                 cli.Size
	conns, clientCache, tableInline          int
	readyTimeout, dialTimeout, attemptTime   time.Duration
	leaseDrift                               float64
	tableInlineGrace                         time.Duration
	requestTimeout                           time.Duration
	startTLS                                 bool
	// Sweep.
	mixes, consistencies, clients, valueSizes, rates string
	keys, keySize, scanLength                        int
	dist                                             string
	zipfS                                            float64
	mode                                             string
	duration, warmup, idle, settle                   time.Duration
	maxData                                          cli.Size
	seed                                             uint64
	// Baselines.
	baseline      bool
	baselineIters int
	rdma          rdmaOptions
	tls           cli.ClientTLSFlags
	// Output.
	write, out, jsonOut, plots string
	cpuProfile                 string
	quiet                      bool
	// kvdExtra are more kvd flags for started nodes, from commands that
	// start clusters through run (writepath's --raft-log).
	kvdExtra []string
}

func runFlags(o *runOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("kvbench run", flag.ContinueOnError)
	fs.StringVar(&o.endpoints, "endpoints", "", "cluster client addresses, comma-separated (unless --start-cluster)")
	fs.IntVar(&o.startCluster, "start-cluster", 0, "start an N-node cluster from --bin in a temporary directory, and stop it after")
	fs.StringVar(&o.bin, "bin", "bin", "directory holding the kvd binary (with --start-cluster)")
	fs.StringVar(&o.host, "host", "127.0.0.1", "address started nodes listen on (127.1.0.1 in the RDMA VM)")
	fs.Var(&o.tableMem, "table-mem", "--table-mem of started nodes")
	fs.IntVar(&o.tableInline, "table-inline", 0, "--table-inline of started nodes: inline budget per slot in bytes (0: kvd's default)")
	fs.DurationVar(&o.tableInlineGrace, "table-inline-grace", 0, "--table-inline-grace of started nodes (0: kvd's default)")
	fs.StringVar(&o.transport, "transport", "tcp", "transport: tcp or rdma (rdma needs a build with -tags rdma)")
	fs.BoolVar(&o.startTLS, "tls", false, "with --start-cluster: run the cluster over TLS (certificates generated into its directory; client and peer certificates required) and connect with the generated client certificate")
	fs.StringVar(&o.series, "series", "", "label of this run's results in reports and plots (default: the transport, +tls with TLS)")
	fs.StringVar(&o.serverPIDs, "server-pids", "", "server process ids whose CPU time is charged to the runs (found by itself with --start-cluster)")
	fs.IntVar(&o.conns, "conns", 4, "client instances (each with its own connections) the workers share")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", cluster.DefaultReadyTimeout, "with --start-cluster: how long the started cluster may take to serve its first write; also bounds connecting each client instance before the runs")
	fs.DurationVar(&o.dialTimeout, "dial-timeout", 0, "the clients' DialTimeout (0: the client's default); raise it where connecting is slow (many RDMA client instances in the VM)")
	fs.Float64Var(&o.leaseDrift, "lease-drift", client.DefaultLeaseDrift,
		"the servers' --lease-drift, which the clients judge leases by (with --start-cluster, the started nodes get it too)")
	fs.DurationVar(&o.attemptTime, "attempt-timeout", 0, "the clients' AttemptTimeout (0: the client's default, 1s): it must exceed the slowest healthy PUT, which under emulation (the VM) and many clients can take seconds")
	fs.DurationVar(&o.requestTimeout, "request-timeout", 0, "the clients' RequestTimeout, the most one operation may take (0: the client's default, 15s)")
	fs.IntVar(&o.clientCache, "client-cache", 0, "client location cache entries (0: the client's default; -1: off, so every one-sided GET takes 2 round trips)")

	fs.StringVar(&o.mixes, "mix", "100/0,95/5,50/50,0/100", "GET/PUT mixes: 95/5, ycsb-a..c, get, put, cas (compare-and-swap read-modify-writes), or scan (ycsb-e: 95% short range scans, 5% inserts)")
	fs.StringVar(&o.consistencies, "consistency", "linearizable,readindex", "GET consistencies: linearizable and serializable are one-sided, readindex is an RPC")
	fs.StringVar(&o.clients, "clients", "1,4,16,64", "closed-loop concurrencies (open loop: most operations in flight)")
	fs.StringVar(&o.valueSizes, "value-size", "256", "value sizes, e.g. 16,256,4KiB,64KiB")
	fs.IntVar(&o.keys, "keys", workload.DefaultKeys, "key space size (capped per value size by --max-data)")
	fs.IntVar(&o.keySize, "key-size", workload.DefaultKeySize, "key length in bytes")
	fs.IntVar(&o.scanLength, "scan-length", workload.DefaultScanLength, "--mix scan: each scan reads a length drawn uniformly from 1 to this many keys (YCSB-E: 100)")
	fs.StringVar(&o.dist, "dist", "uniform", "key distribution: uniform or zipf")
	fs.Float64Var(&o.zipfS, "zipf-s", workload.DefaultZipfS, "Zipf exponent (> 1)")
	fs.StringVar(&o.mode, "mode", "closed", "closed (fixed concurrency) or open (fixed rate, latency from intended start)")
	fs.StringVar(&o.rates, "rate", "", "open-loop target rates in ops/s, comma-separated")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "measured time per point")
	fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured time before each point")
	fs.DurationVar(&o.idle, "idle", time.Second, "measure the servers' idle CPU for this long first (0: skip)")
	fs.DurationVar(&o.settle, "settle", 500*time.Millisecond, "pause after each preload so the servers' background work settles")
	fs.Var(&o.maxData, "max-data", "cap on preloaded bytes (default: a quarter of --table-mem, or 16MiB)")
	fs.Uint64Var(&o.seed, "seed", bench.DefaultSeed, "random seed for keys and operations")

	fs.BoolVar(&o.baseline, "baseline", true, "measure the TCP ping-pong baseline at the value sizes too (labelled with --series)")
	fs.IntVar(&o.baselineIters, "baseline-iters", 20000, "round trips per baseline size and shape")
	o.rdma.flags(fs)
	o.tls.Register(fs)

	fs.StringVar(&o.write, "w", "table", "stdout: table, json, marked (JSON between markers) or none")
	fs.StringVar(&o.out, "out", "", "also write results.{json,md,csv}, baselines.csv and plots into this directory")
	fs.StringVar(&o.jsonOut, "json", "", "also write the JSON report to this file")
	fs.StringVar(&o.plots, "plots", "png,svg", "plot formats written with --out (empty: none)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "with --start-cluster: start the nodes with --enable-pprof and write a CPU profile of each node during each point's measured part into this directory (<n>-<series>-<point>-node<i>.pprof; read with go tool pprof)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress on stderr")
	return fs
}

// buildSweep turns the flags into the points to run.
func (o *runOptions) buildSweep() (bench.Sweep, error) {
	var s bench.Sweep
	var err error
	if s.Mixes, err = mixes("mix", o.mixes); err != nil {
		return s, err
	}
	if s.Consistencies, err = consistencies("consistency", o.consistencies); err != nil {
		return s, err
	}
	if s.Clients, err = listOf("clients", o.clients, positiveInt); err != nil {
		return s, err
	}
	if s.ValueSizes, err = listOf("value-size", o.valueSizes, size); err != nil {
		return s, err
	}
	if len(s.ValueSizes) == 0 {
		s.ValueSizes = []int{workload.DefaultValueSize}
	}
	if s.Rates, err = listOf("rate", o.rates, positiveFloat); err != nil {
		return s, err
	}
	dist, err := workload.ParseDist(o.dist)
	if err != nil {
		return s, usageError{err.Error()}
	}
	mode, err := bench.ParseMode(o.mode)
	if err != nil {
		return s, usageError{err.Error()}
	}
	if mode == bench.Open && len(s.Rates) == 0 {
		return s, usageError{"--mode open needs --rate"}
	}
	if !(o.leaseDrift > 0 && o.leaseDrift <= 0.5) { // NaN fails too
		return s, usageError{fmt.Sprintf("--lease-drift %v: want a fraction in (0, 0.5]", o.leaseDrift)}
	}
	s.Base = bench.Point{
		Workload: workload.Config{Keys: o.keys, KeySize: o.keySize, Dist: dist, ZipfS: o.zipfS, ScanLength: o.scanLength},
		Mode:     mode, Duration: o.duration, Warmup: o.warmup,
	}
	s.MaxData = int64(o.maxData)
	if s.MaxData == 0 {
		s.MaxData = 16 << 20
		if o.startCluster > 0 && o.tableMem > 0 {
			s.MaxData = int64(o.tableMem) / 4
		}
	}
	for _, p := range s.Points() {
		if err := p.Validate(); err != nil {
			return s, usageError{err.Error()}
		}
	}
	return s, nil
}

func runCmd(ctx context.Context, args []string) error {
	o := &runOptions{tableMem: 256 << 20}
	if err := parse(runFlags(o), args, false); err != nil {
		return err
	}
	if err := checkWrite(o.write); err != nil {
		return err
	}
	rep, runErr := o.run(ctx)
	if rep == nil {
		return runErr
	}
	if err := emit(o, rep); err != nil {
		return err
	}
	return runErr
}

// run measures what o describes. It returns a nil report if nothing could
// be measured (bad flags, no cluster), else the report of what was, with
// an error if that is not everything.
func (o *runOptions) run(ctx context.Context) (*result.Report, error) {
	sweep, err := o.buildSweep()
	if err != nil {
		return nil, err
	}
	if o.series == "" {
		o.series = o.transport
		if o.startTLS || o.tls.Files.Enabled() {
			o.series += "+tls"
		}
	}
	// perftest runs before kvbench starts a cluster: a raw baseline is
	// cleaner on an idle machine, and in the Soft-RoCE VM, with three kvd
	// nodes running, perftest printed inf for every latency (its CPU
	// frequency check failed under the load).
	perf, perfErr := o.rdma.collect(ctx, o.series, sweep.ValueSizes, newPrinter(os.Stderr, o.quiet))
	if perfErr != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	env, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	defer env.close()
	rep := &result.Report{Schema: result.SchemaVersion, Meta: []result.Meta{newMeta(o.series, env.describe, os.Args[1:])}}
	rep.Baselines = perf
	runErr := measure(ctx, o, env, sweep, rep, perfErr)
	if runErr != nil && env.cluster != nil {
		if dead := env.cluster.Exited(); dead != "" {
			runErr = fmt.Errorf("%w\n%s", runErr, dead)
		}
	}
	return rep, runErr
}

// emit writes the report wherever the flags say, partial or not.
func emit(o *runOptions, rep *result.Report) error {
	if o.out != "" {
		if err := writeDir(o.out, rep, splitList(o.plots)); err != nil {
			return err
		}
	}
	if o.jsonOut != "" {
		if err := writeFile(o.jsonOut, func(w io.Writer) error { return result.WriteJSON(w, rep) }); err != nil {
			return err
		}
	}
	return writeStdout(os.Stdout, o.write, rep)
}

// measure runs the baselines and every point into rep. On error rep holds
// what was measured so far.
func measure(ctx context.Context, o *runOptions, env *runEnv, sweep bench.Sweep, rep *result.Report, perfErr error) error {
	pr := newPrinter(os.Stderr, o.quiet)
	cfg := bench.Config{
		Stores: env.stores, Transport: o.transport, Series: o.series, ServerPIDs: env.pids, Seed: o.seed,
		Settle: o.settle, Progress: pr.progress,
	}
	if o.cpuProfile != "" {
		if err := os.MkdirAll(o.cpuProfile, 0o755); err != nil {
			return err
		}
		prof := &profiler{dir: o.cpuProfile, series: fileLabel(cmp.Or(o.series, o.transport)), addrs: env.metrics}
		cfg.Profile = prof.start
	}
	r, err := bench.New(cfg)
	if err != nil {
		return err
	}
	if len(env.pids) > 0 && o.idle > 0 {
		pr.say("measuring the servers' idle CPU for %v", o.idle)
		idle, err := r.IdleCPU(ctx, o.idle)
		if err != nil {
			return err
		}
		r.SetIdleCPU(idle)
		rep.Meta[0].IdleServerCPU = idle
	}
	// What could not be measured is reported (whatever --quiet says) and
	// fails the invocation at the end, after everything else was measured:
	// a report must not look complete when it is not.
	var missing []error
	if perfErr != nil {
		pr.warn("perftest baselines incomplete: %v", perfErr)
		missing = append(missing, perfErr)
	}
	if o.baseline {
		pr.say("measuring the TCP baseline at %s", o.valueSizes)
		b, err := tcpBaseline(ctx, sweep.ValueSizes, o.keySize, o.baselineIters, o.series)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			pr.warn("TCP baseline failed: %v", err)
			missing = append(missing, err)
		}
		rep.Baselines = append(b, rep.Baselines...)
	}
	points := sweep.Points()
	for i, p := range points {
		pr.start(i+1, len(points), &p)
		if err := r.Preload(ctx, p.Workload); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			pr.warn("skipping %v: %v", &p, err)
			missing = append(missing, fmt.Errorf("skipped %v: %w", &p, err))
			continue
		}
		run, err := r.Run(ctx, p)
		if err != nil {
			return err
		}
		rep.Runs = append(rep.Runs, run)
		pr.done(&run)
		if run.Ops == 0 {
			// Nothing completed in the measured window (an operation took
			// longer than --duration): the row has no figures to read.
			err := fmt.Errorf("%v: no operation completed in %.1fs (%d errors); lengthen --duration", &p, run.Seconds, run.Errors)
			pr.warn("%v", err)
			missing = append(missing, err)
		}
	}
	return errors.Join(missing...)
}

// runEnv is the cluster being measured and the clients measuring it.
type runEnv struct {
	cluster  *cluster.Cluster
	tr       transport.Transport
	clients  []*client.Client
	stores   []bench.Store
	pids     []int
	metrics  []string // the started nodes' metrics listeners, with --cpuprofile
	describe string
}

func connect(ctx context.Context, o *runOptions) (*runEnv, error) {
	env := &runEnv{}
	eps := splitList(o.endpoints)
	if o.tls.Files.Enabled() && o.startCluster > 0 {
		return nil, usageError{"--cacert, --cert and --key are for --endpoints: --start-cluster makes its own (--tls)"}
	}
	if o.cpuProfile != "" && o.startCluster == 0 {
		return nil, usageError{"--cpuprofile is for --start-cluster: against --endpoints run kvd with --enable-pprof and use go tool pprof"}
	}
	if o.startTLS && o.startCluster == 0 {
		return nil, usageError{"--tls is for --start-cluster: against --endpoints give --cacert, --cert and --key"}
	}
	if err := o.tls.Files.Check(); err != nil {
		return nil, usageError{err.Error()}
	}
	switch {
	case o.startCluster > 0:
		tr := o.transport
		if o.startTLS {
			tr += " (TLS)"
		}
		fmt.Fprintf(os.Stderr, "kvbench: starting a %d-node %s cluster from %s\n", o.startCluster, tr, o.bin)
		c, err := cluster.Start(ctx, cluster.Config{Bin: o.bin, Nodes: o.startCluster, Transport: o.transport,
			Host: o.host, TableMem: strconv.FormatInt(int64(o.tableMem), 10), TLS: o.startTLS, ReadyTimeout: o.readyTimeout,
			Args: o.kvdArgs(), Pprof: o.cpuProfile != ""})
		if err != nil {
			return nil, err
		}
		env.cluster, eps, env.pids, env.metrics = c, c.Endpoints, c.PIDs(), c.MetricsAddrs
		if c.Certs != nil {
			o.tls.Files = c.Certs.ClientFiles()
		}
		env.describe = fmt.Sprintf("%d %s nodes started by kvbench (table %d MiB each%s)", o.startCluster, tr, o.tableMem>>20, o.inlineNote())
	case len(eps) > 0:
		pids, err := listOf("server-pids", o.serverPIDs, positiveInt)
		if err != nil {
			return nil, err
		}
		env.pids = pids
		env.describe = fmt.Sprintf("%s at %s", o.transport, strings.Join(eps, ","))
		if o.tls.Files.Enabled() {
			env.describe += " over TLS"
		}
	default:
		return nil, usageError{"give --endpoints or --start-cluster N"}
	}
	if err := env.dial(ctx, o, eps); err != nil {
		env.close()
		return nil, err
	}
	return env, nil
}

func (env *runEnv) dial(ctx context.Context, o *runOptions, eps []string) error {
	tf := cli.TransportFlags{Name: o.transport}
	var err error
	if tf.TLS, err = o.tls.TLS(); err != nil {
		return err
	}
	tr, err := tf.Transport("")
	if err != nil {
		return usageError{fmt.Sprintf("--transport: %v", err)}
	}
	env.tr = tr
	for range max(1, o.conns) {
		c, err := client.New(client.Config{Endpoints: eps, Transport: tr, CacheEntries: o.clientCache, DialTimeout: o.dialTimeout,
			AttemptTimeout: o.attemptTime, RequestTimeout: o.requestTimeout, LeaseDrift: o.leaseDrift})
		if err != nil {
			return err
		}
		env.clients = append(env.clients, c)
		env.stores = append(env.stores, bench.Client{Client: c})
	}
	// Connect every client instance before measuring, one at a time: a GET
	// makes each dial the leader, read its table's geometry and sync its
	// clock. No point (nor the preload, whose PUTs have deadlines) then
	// pays for connection setup, which with many instances on a slow
	// machine (the Soft-RoCE VM) takes seconds; and a cluster that cannot
	// take that many connections fails here, saying so.
	for i, c := range env.clients {
		cctx, cancel := context.WithTimeout(ctx, o.readyTimeout)
		_, err := c.Get(cctx, []byte(connectKey))
		cancel()
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			return fmt.Errorf("connecting client instance %d of %d: %w", i+1, len(env.clients), err)
		}
	}
	return nil
}

// connectKey is the key every client instance GETs to connect; it need not
// exist.
const connectKey = "kvbench-connect"

func (env *runEnv) close() {
	for _, c := range env.clients {
		c.Close()
	}
	if env.tr != nil {
		env.tr.Close()
	}
	if env.cluster != nil {
		if err := env.cluster.Stop(); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(os.Stderr, "kvbench: stopping the cluster:", err)
		}
	}
}

// kvdArgs are the kvd flags of started nodes that kvbench has flags for
// beyond cluster.Config's own.
func (o *runOptions) kvdArgs() []string {
	var args []string
	if o.tableInline != 0 {
		args = append(args, "--table-inline", strconv.Itoa(o.tableInline))
	}
	if o.tableInlineGrace != 0 {
		args = append(args, "--table-inline-grace", o.tableInlineGrace.String())
	}
	if o.leaseDrift != client.DefaultLeaseDrift {
		args = append(args, "--lease-drift", strconv.FormatFloat(o.leaseDrift, 'g', -1, 64))
	}
	return append(args, o.kvdExtra...)
}

// inlineNote describes the started nodes' inline budget for the report.
func (o *runOptions) inlineNote() string {
	if o.tableInline == 0 {
		if o.tableInlineGrace != 0 {
			return fmt.Sprintf(", --table-inline-grace %v", o.tableInlineGrace)
		}
		return ""
	}
	if o.tableInlineGrace != 0 {
		return fmt.Sprintf(", --table-inline %d --table-inline-grace %v", o.tableInline, o.tableInlineGrace)
	}
	return fmt.Sprintf(", --table-inline %d", o.tableInline)
}
