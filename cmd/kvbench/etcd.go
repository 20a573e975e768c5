package main

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/kvd-project/kvd/bench/cluster"
	"github.com/kvd-project/kvd/bench/etcdseries"
)

// etcdCmd is "kvbench etcd": etcd's benchmark tool against a real 3-member
// etcd, kvd's nodes and a kvd gateway in one run (bench/etcdseries).
func etcdCmd(ctx context.Context, args []string) error {
	var cfg etcdseries.Config
	var bin, out, clients, dataDir string
	fs := flag.NewFlagSet("kvbench etcd", flag.ContinueOnError)
	fs.StringVar(&bin, "bin", "bin", "directory of kvd, etcd (etcd's server) and etcd-benchmark (scripts/etcd-benchmark.sh)")
	fs.StringVar(&out, "out", "bench/results", "directory the table (etcd.md) and every measurement (etcd.json) are written to")
	fs.StringVar(&dataDir, "data-dir", "", "where the clusters keep their data, on the disk being measured (default: a new temporary directory, removed after)")
	fs.IntVar(&cfg.Rounds, "rounds", etcdseries.DefaultRounds, "rounds: every point on every target, in an order that turns each round; the table gives medians")
	fs.StringVar(&clients, "clients", "1,64", "client counts of every workload but the watch")
	fs.Float64Var(&cfg.Scale, "scale", 1, "multiplies every request total (0.1: a smoke run)")
	fs.IntVar(&cfg.WatchPuts, "watch-puts", etcdseries.DefaultWatchPuts, "puts of the watch-latency point (100/s)")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	var err error
	if cfg.Clients, err = listOf("clients", clients, positiveInt); err != nil {
		return err
	}
	for _, name := range []string{"kvd", "etcd", "etcd-benchmark"} {
		if _, err := exec.LookPath(filepath.Join(bin, name)); err != nil {
			return usageError{fmt.Sprintf("--bin %s has no %s (make build; scripts/deps.sh for etcd; scripts/etcd-benchmark.sh for etcd-benchmark): %v", bin, name, err)}
		}
	}
	cfg.Benchmark = filepath.Join(bin, "etcd-benchmark")
	cfg.Log = os.Stderr
	if dataDir == "" {
		if dataDir, err = os.MkdirTemp("", "kvbench-etcd-"); err != nil {
			return err
		}
		defer os.RemoveAll(dataDir)
	}
	stop, targets, err := startEtcdTargets(ctx, bin, dataDir)
	defer stop()
	if err != nil {
		return err
	}
	cfg.Targets = targets
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	loadBefore := loadAverage()
	res, runErr := etcdseries.Run(ctx, cfg)
	load := fmt.Sprintf("load average %s at the start, %s at the end", loadBefore, loadAverage())
	if res == nil {
		return runErr
	}
	if runErr != nil {
		// Only a complete run replaces the results; a partial one is kept
		// for a look.
		partial, err := os.MkdirTemp("", "kvbench-etcd-partial-")
		if err != nil {
			return errors.Join(runErr, err)
		}
		return errors.Join(runErr, writeEtcdResults(partial, bin, load, cfg, res),
			fmt.Errorf("%s was left as it was; the partial tables are in %s", out, partial))
	}
	return writeEtcdResults(out, bin, load, cfg, res)
}

// startEtcdTargets starts the three targets: a 3-member etcd, a 3-node kvd
// cluster whose nodes serve etcd's API, and a kvd gateway in front of it.
// stop stops whatever was started, also after an error.
func startEtcdTargets(ctx context.Context, bin, dir string) (stop func(), _ []etcdseries.Target, _ error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	fmt.Fprintln(os.Stderr, "kvbench etcd: starting a 3-member etcd")
	etcd, err := etcdseries.StartEtcd(ctx, filepath.Join(bin, "etcd"), dir, 3)
	if err != nil {
		return stop, nil, err
	}
	stops = append(stops, etcd.Stop)
	urls, err := cluster.FreeAddrs("127.0.0.1", 3)
	if err != nil {
		return stop, nil, err
	}
	nodeArgs := make([][]string, len(urls))
	for i, u := range urls {
		nodeArgs[i] = []string{"--listen-client-urls", "http://" + u}
	}
	fmt.Fprintln(os.Stderr, "kvbench etcd: starting a 3-node kvd cluster with etcd listeners")
	kvd, err := cluster.Start(ctx, cluster.Config{Bin: bin, Nodes: 3, Dir: filepath.Join(dir, "kvd"), TableMem: "256MiB", NodeArgs: nodeArgs})
	if err != nil {
		return stop, nil, err
	}
	stops = append(stops, func() { _ = kvd.Stop() })
	if err := etcdseries.WaitReady(ctx, urls); err != nil {
		return stop, nil, fmt.Errorf("kvd's etcd listeners: %w", err)
	}
	fmt.Fprintln(os.Stderr, "kvbench etcd: starting a kvd gateway")
	gw, err := etcdseries.StartGateway(ctx, filepath.Join(bin, "kvd"), dir, kvd.Endpoints)
	if err != nil {
		return stop, nil, err
	}
	stops = append(stops, gw.Stop)
	return stop, []etcdseries.Target{
		{Name: "etcd", Endpoints: etcd.Endpoints},
		{Name: "kvd nodes", Endpoints: urls},
		{Name: "kvd gateway", Endpoints: gw.Endpoints},
	}, nil
}

// writeEtcdResults writes out/etcd.md (what was run, the table, the goals)
// and out/etcd.json (every measurement).
func writeEtcdResults(out, bin, load string, cfg etcdseries.Config, res *etcdseries.Result) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "etcd.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# etcd's benchmark tool: etcd, kvd's nodes and kvd's gateway\n\n")
	fmt.Fprintf(&b, "Run of %s (%.0f s, %d CPUs, %s): %s against three targets on this machine, in turn at every point, rounds: %d "+
		"(the table gives medians); %s. `--clients` and `--conns` as in the table (one connection per 8 clients), %d-byte keys, %d-byte values, "+
		"writes over %d keys, ranges of one key. Request totals scaled by %g; the watch point puts %d times at 100/s to 10 streams of 10 watchers.\n\n",
		res.Started.Format("2006-01-02 15:04 UTC"), res.Elapsed, runtime.NumCPU(), load, toolVersion(cfg.Benchmark), res.Rounds, targetsText(bin, res.Targets),
		etcdseries.KeySize, etcdseries.ValueSize, etcdseries.KeySpace, cfg.Scale, cfg.WatchPuts)
	if err := res.WriteMarkdown(&b, etcdseries.Goals("kvd gateway", slices.Max(cfg.Clients))); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "etcd.md"), []byte(b.String()), 0o644)
}

// toolVersion names the benchmark tool's module version, from the binary's
// build information.
func toolVersion(bin string) string {
	const mod = "go.etcd.io/etcd/v3"
	if bi, err := buildinfo.ReadFile(bin); err == nil {
		// Built as a dependency's package, the tool names its own module
		// as the main one.
		for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
			if m.Path == mod {
				return "etcd's benchmark tool " + m.Version
			}
		}
	}
	return "etcd's benchmark tool"
}

func targetsText(bin string, ts []etcdseries.Target) string {
	v, _ := exec.Command(filepath.Join(bin, "etcd"), "--version").Output()
	ver := strings.TrimPrefix(strings.SplitN(string(v), "\n", 2)[0], "etcd Version: ")
	return fmt.Sprintf("a 3-member etcd %s (fsync on, data on the same disk), 3 kvd nodes serving etcd's API (--listen-client-urls), "+
		"and a kvd gateway in front of them (%d, %d and %d endpoints)", ver, len(ts[0].Endpoints), len(ts[1].Endpoints), len(ts[2].Endpoints))
}

// loadAverage is the machine's 1-minute load average, which says how
// shared it was during the run; "?" where /proc does not tell.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
