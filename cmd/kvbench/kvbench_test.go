package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/bench/latency"
	"github.com/kvd-project/kvd/bench/result"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

func TestBuildSweep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		points int
		ok     bool
	}{
		{"defaults", nil, 4*4 - 4, true}, // 3 GET mixes x 2 consistencies x 4 clients... minus 0/100's second consistency
		{"value sweep", []string{"--mix", "get", "--consistency", "linearizable", "--clients", "1", "--value-size", "16,256,4KiB,64KiB"}, 4, true},
		{"open loop", []string{"--mode", "open", "--rate", "1000,2000", "--clients", "32", "--mix", "95/5", "--consistency", "readindex"}, 2, true},
		{"open without rate", []string{"--mode", "open"}, 0, false},
		{"bad mix", []string{"--mix", "95/6"}, 0, false},
		{"bad consistency", []string{"--consistency", "strong"}, 0, false},
		{"bad clients", []string{"--clients", "0"}, 0, false},
		{"bad size", []string{"--value-size", "lots"}, 0, false},
		{"value above the client's max", []string{"--value-size", "2MiB"}, 0, false},
		{"bad dist", []string{"--dist", "normal"}, 0, false},
	} {
		o := &runOptions{}
		if err := parse(runFlags(o), tc.args, false); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		s, err := o.buildSweep()
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if err != nil {
			if !errors.As(err, new(usageError)) {
				t.Errorf("%s: %v is not a usage error", tc.name, err)
			}
			continue
		}
		want := tc.points
		if tc.name == "defaults" {
			want = (3*2 + 1) * 4 // GET mixes x 2 consistencies + 0/100 once, at 4 concurrencies
		}
		if got := len(s.Points()); got != want {
			t.Errorf("%s: %d points, want %d", tc.name, got, want)
		}
	}
}

func TestEnvFlags(t *testing.T) {
	t.Setenv("KVBENCH_CLIENTS", "2,3")
	o := &runOptions{}
	if err := parse(runFlags(o), []string{"--mix", "get"}, false); err != nil {
		t.Fatal(err)
	}
	if o.clients != "2,3" || o.mixes != "get" {
		t.Errorf("clients %q mix %q", o.clients, o.mixes)
	}
	if err := parse(runFlags(o), []string{"stray"}, false); !errors.As(err, new(usageError)) {
		t.Errorf("stray argument: %v", err)
	}
}

func writeReport(t *testing.T, path, series string, marked bool) {
	t.Helper()
	rep := &result.Report{Schema: result.SchemaVersion, Meta: []result.Meta{{Series: series}}}
	for _, c := range []int{1, 4} {
		rep.Runs = append(rep.Runs, result.Run{Series: series, Transport: series, Mix: "100/0", ReadPct: 100,
			Consistency: "linearizable", Mode: "closed", Clients: c, ValueSize: 256, Ops: 10, Gets: 10, Throughput: float64(1000 * c),
			Lat: latency.Summary{Count: 10, P50: 20, P99: 40}, GetLat: latency.Summary{Count: 10, P50: 20, P99: 40},
			CDF: []latency.Point{{Pct: 0, Us: 10}, {Pct: 90, Us: 30}, {Pct: 99, Us: 40}}})
	}
	var b bytes.Buffer
	b.WriteString("boot noise\n")
	write := result.WriteJSON
	if marked {
		write = result.WriteMarked
	}
	if err := write(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !marked {
		b.Next(len("boot noise\n"))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReportCmd merges a JSON file and a console log into one report.
func TestReportCmd(t *testing.T) {
	dir := t.TempDir()
	tcp, vm := filepath.Join(dir, "tcp.json"), filepath.Join(dir, "console.log")
	writeReport(t, tcp, "tcp", false)
	writeReport(t, vm, "rdma", true)
	perf := filepath.Join(dir, "perf.txt")
	if err := os.WriteFile(perf, []byte("RDMAVM-PERF: ib_read_lat bytes=2 iters=100 min=4 typical=5 avg=5.5 p99=9 (usec)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pj := filepath.Join(dir, "perf.json")
	if err := perftestCmd(context.Background(), []string{"-w", "none", "--json", pj, perf}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := reportCmd([]string{"--out", out, "--plots", "png", "-w", "none", tcp, vm, pj}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, mdFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| tcp | 100/0 |", "| rdma | 100/0 |", "ib_read_lat", "throughput-clients.png"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	rep, err := result.ReadFile(filepath.Join(out, jsonFile))
	if err != nil || len(rep.Runs) != 4 || len(rep.Baselines) != 1 || len(rep.Meta) != 3 {
		t.Errorf("merged report: %v, %+v", err, rep)
	}
	// The RDMA GETs are compared with the RDMA READ.
	if x, ok := rep.Runs[2].RatioFor("get"); !ok || x.Kind != result.KindRDMARead || x.P50 != 4 {
		t.Errorf("rdma ratio %+v", x)
	}
	if err := reportCmd(nil); !errors.As(err, new(usageError)) {
		t.Errorf("report without files: %v", err)
	}

	// --require-series: all there, or fail and write nothing.
	if err := reportCmd([]string{"--out", out, "--plots", "", "-w", "none", "--require-series", "tcp,rdma", tcp, vm}); err != nil {
		t.Errorf("both series required and present: %v", err)
	}
	partial := filepath.Join(dir, "partial")
	err = reportCmd([]string{"--out", partial, "-w", "none", "--require-series", "tcp,rdma,vm-tcp", tcp, vm, pj})
	if !errors.Is(err, errMissingSeries) || !strings.Contains(err.Error(), "vm-tcp") {
		t.Errorf("missing series: %v", err)
	}
	if _, serr := os.Stat(partial); !os.IsNotExist(serr) {
		t.Errorf("a report missing a required series was written (%v)", serr)
	}
	// Baselines alone do not make a series present.
	if err := reportCmd([]string{"-w", "none", "--require-series", "rdma", pj}); !errors.Is(err, errMissingSeries) {
		t.Errorf("series with baselines only: %v", err)
	}
}

// TestEndToEnd builds kvd, starts a one-node cluster with kvbench, runs a
// one-second GET workload both ways, and checks what it measured.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvd and starts a cluster")
	}
	bin, err := kvdtest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, prof := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = runCmd(ctx, []string{"--start-cluster", "1", "--bin", bin, "--table-mem", "32MiB", "--mix", "get",
		"--consistency", "linearizable,readindex", "--clients", "2", "--keys", "200", "--duration", "1s", "--warmup", "0s", "--settle", "0s",
		"--idle", "100ms", "--baseline-iters", "300", "--out", out, "--plots", "", "-w", "none", "--quiet", "--cpuprofile", prof})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := result.ReadFile(filepath.Join(out, jsonFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || len(rep.Baselines) != 2 {
		t.Fatalf("%d runs, %d baselines", len(rep.Runs), len(rep.Baselines))
	}
	for _, r := range rep.Runs {
		if r.Ops == 0 || r.Errors != 0 || r.Misses != 0 || r.Throughput <= 0 || r.Lat.P50 <= 0 {
			t.Errorf("%s run: %d ops, %d errors, %d misses, %v ops/s, p50 %v", r.Consistency, r.Ops, r.Errors, r.Misses, r.Throughput, r.Lat.P50)
		}
		if r.ServerPIDs != 1 || r.ServerCPU <= 0 {
			t.Errorf("%s run: server CPU %v over %d pids", r.Consistency, r.ServerCPU, r.ServerPIDs)
		}
		if len(r.Ratios) == 0 {
			t.Errorf("%s run has no baseline ratio", r.Consistency)
		}
	}
	lin, ri := rep.Runs[0], rep.Runs[1]
	// At most 2 round trips a GET (an out-of-place record, cached or not:
	// the bucket, then the record), and now and then a retry.
	if lin.Consistency != "linearizable" || lin.OneSidedGets() == 0 || lin.RoundsPerOneSidedGet() < 1 || lin.RoundsPerOneSidedGet() > 2.2 {
		t.Errorf("one-sided run: %d one-sided GETs, %v rounds each", lin.OneSidedGets(), lin.RoundsPerOneSidedGet())
	}
	if ri.Consistency != "readindex" || ri.RPCGets == 0 || ri.OneSidedGets() != 0 {
		t.Errorf("readindex run: %d RPC GETs, %d one-sided", ri.RPCGets, ri.OneSidedGets())
	}
	csv, err := os.ReadFile(filepath.Join(out, runsCSV))
	if err != nil || strings.Count(string(csv), "\n") != 3 {
		t.Errorf("results.csv: %v\n%s", err, csv)
	}
	// --cpuprofile: one profile of the node per point, gzipped protobuf
	// as net/http/pprof writes them.
	profiles, _ := filepath.Glob(filepath.Join(prof, "*-tcp-*-node1.pprof"))
	if len(profiles) != 2 {
		t.Fatalf("profiles %v; want one per point", profiles)
	}
	for _, f := range profiles {
		if b, err := os.ReadFile(f); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s is no pprof profile (%d bytes, %v)", f, len(b), err)
		}
	}
}

// TestCPUProfileNeedsStartCluster: --cpuprofile against --endpoints is a
// usage error (kvbench cannot turn pprof on in nodes it did not start).
func TestCPUProfileNeedsStartCluster(t *testing.T) {
	err := runCmd(context.Background(), []string{"--endpoints", "127.0.0.1:1", "--cpuprofile", t.TempDir(), "-w", "none", "--quiet"})
	if err == nil || !strings.Contains(err.Error(), "--cpuprofile is for --start-cluster") {
		t.Fatalf("err = %v", err)
	}
}

// TestEndToEndTLS: --tls starts the cluster over TLS with generated
// certificates and measures it as series tcp+tls; it is for --start-cluster
// only.
func TestEndToEndTLS(t *testing.T) {
	if err := runCmd(context.Background(), []string{"--endpoints", "127.0.0.1:1", "--tls", "-w", "none"}); !errors.As(err, new(usageError)) {
		t.Errorf("--tls with --endpoints: %v", err)
	}
	if testing.Short() {
		t.Skip("builds kvd and starts a cluster")
	}
	bin, err := kvdtest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(t.TempDir(), "r.json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = runCmd(ctx, []string{"--start-cluster", "1", "--tls", "--bin", bin, "--table-mem", "32MiB", "--mix", "get,put",
		"--consistency", "linearizable", "--clients", "1", "--keys", "100", "--duration", "300ms", "--warmup", "0s", "--settle", "0s",
		"--idle", "0s", "--baseline=false", "--json", js, "-w", "none", "--quiet"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := result.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || !strings.Contains(rep.Meta[0].Cluster, "TLS") {
		t.Fatalf("%d runs; cluster %q", len(rep.Runs), rep.Meta[0].Cluster)
	}
	for _, r := range rep.Runs {
		if r.Series != "tcp+tls" || r.Ops == 0 || r.Errors != 0 {
			t.Errorf("%s %s run: %d ops, %d errors", r.Series, r.Mix, r.Ops, r.Errors)
		}
	}
}
