package report

import (
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/bench/latency"
	"github.com/kvd-project/kvd/bench/result"
)

func getRun(cons string, rounds, rpc uint64, cpuPerOp, net float64) result.Run {
	return result.Run{
		Series: "tcp", Transport: "tcp", Mix: "100/0", ReadPct: 100, Consistency: cons, Dist: "uniform",
		Keys: 1000, KeySize: 16, ValueSize: 256, Mode: "closed", Clients: 4, Seconds: 2,
		Ops: 20000, Gets: 20000, Throughput: 10000,
		Lat:        latency.Summary{Count: 20000, P50: 50, P99: 150, P999: 400, Max: 2500},
		GetLat:     latency.Summary{Count: 20000, Mean: 60, P50: 50, P90: 90, P99: 150, P999: 400, Max: 2500},
		ClientGets: 20000, OneSidedRounds: rounds, RPCGets: rpc, ServerPIDs: 3, ServerCPUPerOp: cpuPerOp, ServerCPUNetPerOp: net,
		OneSidedReads: rounds * 3, OneSidedBytes: rounds * 200,
	}
}

func sample() *result.Report {
	put := result.Run{
		Series: "tcp", Transport: "tcp", Mix: "0/100", ReadPct: 0, Consistency: "linearizable", Dist: "zipf",
		ValueSize: 4096, Mode: "open", Clients: 64, TargetRate: 5000, Ops: 1000, Puts: 1000, Errors: 7, Throughput: 4990.4,
		Lat:    latency.Summary{Count: 1000, P50: 1234.5, P99: 5000, P999: 9000, Max: 12000},
		PutLat: latency.Summary{Count: 1000, P50: 1234.5, P99: 5000, P999: 9000, Max: 12000},
	}
	return &result.Report{
		Schema: result.SchemaVersion,
		Meta:   []result.Meta{{Series: "tcp", Host: "box", CPUs: 2, GoVersion: "go1.26", Started: time.Unix(0, 0), Cluster: "3 nodes", IdleServerCPU: 0.02}},
		Runs: []result.Run{
			getRun("linearizable", 40000, 0, 5, 2),
			getRun("readindex", 0, 20000, 40, 38),
			put,
		},
		Baselines: []result.Baseline{
			{Series: "tcp", Transport: "tcp", Kind: result.KindTCPRead, Bytes: 256, Iters: 100, Lat: latency.Summary{P50: 20, P99: 50}, RTTFactor: 1, Source: "echo"},
			{Series: "tcp", Transport: "tcp", Kind: result.KindTCPWrite, Bytes: 4096, Iters: 100, Lat: latency.Summary{P50: 30, P99: 60}, RTTFactor: 1, Source: "echo"},
			{Series: "rdma", Transport: "rdma", Kind: result.KindRDMASend, Bytes: 2, Iters: 100, Lat: latency.Summary{P50: 10}, RTTFactor: 2, Source: "ib_send_lat"},
		},
	}
}

// section returns the markdown table under heading h.
func section(t *testing.T, md, h string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "## "+h+"\n")
	if !ok {
		t.Fatalf("no section %q in:\n%s", h, md)
	}
	var rows []string
	for _, l := range strings.Split(rest, "\n") {
		if strings.HasPrefix(l, "## ") {
			break
		}
		if strings.HasPrefix(l, "|") {
			rows = append(rows, l)
		}
	}
	return rows
}

func cells(row string) []string {
	parts := strings.Split(strings.Trim(row, "|"), " | ")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// cell finds column col of the row whose cells include all of match.
func cell(t *testing.T, rows []string, col string, match ...string) string {
	t.Helper()
	header := cells(rows[0])
	idx := -1
	for i, h := range header {
		if h == col {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("no column %q in %v", col, header)
	}
	for _, r := range rows[2:] {
		c := cells(r)
		all := true
		for _, m := range match {
			found := false
			for _, x := range c {
				found = found || x == m
			}
			all = all && found
		}
		if all {
			return c[idx]
		}
	}
	t.Fatalf("no row with %v in %v", match, rows)
	return ""
}

func TestMarkdown(t *testing.T) {
	rep := sample()
	var b strings.Builder
	if err := Markdown(&b, rep, Options{Images: []Image{{"latency CDF", "latency-cdf.png"}}}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	if rep.Runs[0].Ratios != nil {
		t.Error("Markdown modified the report")
	}
	runs := section(t, md, "Throughput and latency")
	if len(runs) != 2+3 {
		t.Fatalf("%d rows in the runs table", len(runs))
	}
	if strings.Count(runs[1], "---:") != 17 {
		t.Errorf("separator %q: numeric columns not right-aligned", runs[1])
	}
	for _, tc := range []struct {
		col   string
		match []string
		want  string
	}{
		{"ops/s", []string{"linearizable"}, "10000"},
		{"p50", []string{"linearizable"}, "50.0"},
		{"max", []string{"linearizable"}, "2500"},
		{"GET p50 ×base", []string{"linearizable"}, "2.5×"},
		{"GET p99 ×base", []string{"linearizable"}, "3.0×"},
		{"PUT p50 ×base", []string{"linearizable"}, "–"},
		{"rt/GET", []string{"linearizable"}, "2.00"},
		{"rt/GET", []string{"readindex"}, "1.00"},
		{"READs/GET", []string{"linearizable"}, "6.00"},
		{"B/GET", []string{"linearizable"}, "400"},
		{"READs/GET", []string{"readindex"}, "–"},
		{"B/GET", []string{"readindex"}, "–"},
		{"srv CPU µs/op", []string{"readindex"}, "40.0"},
		{"net µs/op", []string{"readindex"}, "38.0"},
		{"consistency", []string{"0/100"}, "–"},
		{"clients", []string{"0/100"}, "open 5000/s ≤64"},
		{"value", []string{"0/100"}, "4 KiB"},
		{"PUT p50 ×base", []string{"0/100"}, "41.1×"},
		{"errors", []string{"0/100"}, "7"},
		{"p50", []string{"0/100"}, "1234"},
	} {
		if got := cell(t, runs, tc.col, tc.match...); got != tc.want {
			t.Errorf("runs table %s for %v = %q, want %q", tc.col, tc.match, got, tc.want)
		}
	}

	ops := section(t, md, "Per-operation latency")
	if len(ops) != 2+3 {
		t.Errorf("%d rows in the per-op table", len(ops))
	}
	if got := cell(t, ops, "baseline", "put"); got != "tcp-write 4 KiB (p50 30.0)" {
		t.Errorf("put baseline cell %q", got)
	}

	paths := section(t, md, "One-sided and RPC GETs")
	if len(paths) != 2+2 {
		t.Fatalf("%d rows in the GET path table", len(paths))
	}
	if !strings.Contains(paths[2], "one-sided (linearizable)") || !strings.Contains(paths[3], "RPC (readindex)") {
		t.Errorf("GET paths out of order:\n%s\n%s", paths[2], paths[3])
	}
	if got := cell(t, paths, "net CPU vs RPC", "one-sided (linearizable)"); got != "5%" {
		t.Errorf("one-sided net CPU vs RPC = %q, want 5%% (2/38)", got)
	}
	if got := cell(t, paths, "net CPU vs RPC", "RPC (readindex)"); got != "–" {
		t.Errorf("RPC compared with itself: %q", got)
	}
	if got := cell(t, paths, "READs/GET", "one-sided (linearizable)"); got != "6.00" {
		t.Errorf("one-sided READs/GET = %q, want 6.00", got)
	}
	if strings.Contains(md, "## One client instance per client") || strings.Contains(md, "## Against perftest") {
		t.Error("sections without runs for them")
	}

	bases := section(t, md, "Baselines")
	if got := cell(t, bases, "source", "ib_send_lat"); !strings.Contains(got, "×2") {
		t.Errorf("doubled send latency not explained: %q", got)
	}
	if !strings.Contains(md, "**tcp**: box, 2 CPUs") || !strings.Contains(md, "![latency CDF](latency-cdf.png)") {
		t.Errorf("sources or images missing:\n%s", md)
	}
}

func TestSummaryAndEmpty(t *testing.T) {
	var b strings.Builder
	if err := Summary(&b, sample()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n"); n != 5 {
		t.Errorf("summary has %d lines:\n%s", n, b.String())
	}
	b.Reset()
	if err := Markdown(&b, &result.Report{Schema: 1}, Options{Title: "T"}); err != nil {
		t.Fatal(err)
	}
	if b.String() != "# T\n\n" {
		t.Errorf("empty report renders %q", b.String())
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{us(0), "–"}, {us(5.123), "5.12"}, {us(51.23), "51.2"}, {us(512.3), "512"},
		{times(2.449), "2.4×"}, {times(123.4), "123×"}, {times(0), "–"},
		{bytes(16), "16 B"}, {bytes(4096), "4 KiB"}, {bytes(1 << 20), "1 MiB"}, {bytes(1500), "1500 B"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestZeroCPU: a run that cost the servers no CPU above idle shows 0, not
// "no data"; a run without server PIDs shows no data.
func TestZeroCPU(t *testing.T) {
	rep := sample()
	rep.Runs[0].ServerCPUNetPerOp = 0
	rep.Runs[1].ServerPIDs = 0
	var b strings.Builder
	if err := Markdown(&b, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	runs := section(t, b.String(), "Throughput and latency")
	if got := cell(t, runs, "net µs/op", "linearizable", "100/0"); got != "0" {
		t.Errorf("zero net CPU shows %q", got)
	}
	if got := cell(t, runs, "srv CPU µs/op", "readindex"); got != "–" {
		t.Errorf("unmeasured CPU shows %q", got)
	}
}

// TestGetPathPairing: with the same point measured by two sweeps, each
// one-sided run is compared with its own sweep's RPC run.
func TestGetPathPairing(t *testing.T) {
	rep := sample()
	rep.Runs = []result.Run{
		getRun("linearizable", 40000, 0, 5, 2), getRun("readindex", 0, 20000, 40, 40),
		getRun("linearizable", 40000, 0, 5, 3), getRun("readindex", 0, 20000, 40, 10),
	}
	var b strings.Builder
	if err := Markdown(&b, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	paths := section(t, b.String(), "One-sided and RPC GETs")
	var got []string
	for _, row := range paths[2:] {
		c := cells(row)
		got = append(got, c[len(c)-1])
	}
	if strings.Join(got, " ") != "5% 30% – –" {
		t.Errorf("net CPU vs RPC column %v, want [5%% 30%% – –]", got)
	}
}

// TestInstancesAndPerftest: runs with one client instance per client (and
// many of them) get their own table; one-client RDMA runs are set next to
// perftest at the nearest size.
func TestInstancesAndPerftest(t *testing.T) {
	rep := sample()
	many := getRun("linearizable", 20000, 0, 30, 29)
	many.Keys, many.Clients, many.Conns = 100000, 64, 64
	shared := many
	shared.Conns = 4
	rget := getRun("linearizable", 20000, 0, 1, 0)
	rget.Series, rget.Transport, rget.Clients, rget.ValueSize, rget.GetLat.P50 = "vm-rdma", "rdma", 1, 1<<20, 3000
	rput := rget
	rput.Mix, rput.ReadPct, rput.Gets, rput.Puts, rput.PutLat = "0/100", 0, 0, 20000, latency.Summary{P50: 9000, P99: 20000}
	rep.Runs = []result.Run{many, shared, rget, rput}
	rep.Baselines = []result.Baseline{
		{Series: "vm-rdma", Transport: "rdma", Kind: result.KindRDMARead, Bytes: 64 << 10, Lat: latency.Summary{P50: 100}},
		{Series: "vm-rdma", Transport: "rdma", Kind: result.KindRDMARead, Bytes: 1 << 20, Lat: latency.Summary{P50: 1500, P99: 2000}},
		{Series: "vm-rdma", Transport: "rdma", Kind: result.KindRDMASend, Bytes: 1 << 20, Lat: latency.Summary{P50: 3000}, RTTFactor: 2},
	}
	var b strings.Builder
	if err := Markdown(&b, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	inst := section(t, md, "One client instance per client")
	if len(inst) != 3 {
		t.Fatalf("instances table:\n%s", strings.Join(inst, "\n"))
	}
	for col, want := range map[string]string{"keys": "100000", "instances": "64", "srv CPU µs/op": "30.0", "READs/GET": "3.00"} {
		if got := cell(t, inst, col, "tcp"); got != want {
			t.Errorf("instances %s = %q, want %q", col, got, want)
		}
	}
	perf := section(t, md, "Against perftest")
	if len(perf) != 4 {
		t.Fatalf("perftest table:\n%s", strings.Join(perf, "\n"))
	}
	for _, tc := range []struct{ col, op, want string }{
		{"perftest", "GET one-sided (linearizable)", "ib_read_lat 1 MiB"},
		{"p50 ×", "GET one-sided (linearizable)", "2.0×"},
		{"perftest", "PUT", "ib_send_lat 1 MiB"},
		{"p50 ×", "PUT", "3.0×"},
		{"rt/GET", "PUT", "–"},
	} {
		if got := cell(t, perf, tc.col, tc.op); got != tc.want {
			t.Errorf("perftest %s of %s = %q, want %q", tc.col, tc.op, got, tc.want)
		}
	}
}

// TestTLSCost: a "tcp+tls" run is set next to the same point of "tcp" (the
// last before it), and runs without a plaintext twin are left out.
func TestTLSCost(t *testing.T) {
	rep := sample()
	plain := getRun("linearizable", 40000, 0, 40, 38)
	older := plain
	older.Throughput = 1
	tls := getRun("linearizable", 40000, 0, 50, 48)
	tls.Series, tls.Throughput, tls.Lat.P50 = "tcp+tls", 8000, 60
	lonely := tls
	lonely.Clients = 64
	rep.Runs = []result.Run{older, plain, tls, lonely, getRun("readindex", 0, 20000, 40, 10)}
	var b strings.Builder
	if err := Markdown(&b, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	rows := section(t, b.String(), "TLS cost")
	if len(rows) != 3 {
		t.Fatalf("TLS cost rows:\n%s", strings.Join(rows, "\n"))
	}
	for col, want := range map[string]string{"vs": "tcp", "ops/s": "10000", "ops/s TLS": "8000", "ops/s ×": "0.80×",
		"p50 ×": "1.20×", "srv CPU µs/op": "40.0", "srv CPU TLS": "50.0", "CPU ×": "1.25×"} {
		if got := cell(t, rows, col, "tcp+tls"); got != want {
			t.Errorf("%s = %q, want %q", col, got, want)
		}
	}
	rep.Runs = rep.Runs[:2]
	b.Reset()
	if err := Markdown(&b, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "## TLS cost") {
		t.Error("TLS cost section without TLS runs")
	}
}

// TestCASTable: runs of the cas mix get their own table, with the share of
// CASes that conflicted; other runs stay out of it.
func TestCASTable(t *testing.T) {
	rep := sample()
	cas := rep.Runs[0]
	cas.Mix, cas.ReadPct, cas.Gets, cas.Puts, cas.Conflicts, cas.Keys = "cas", -1, 0, 2000, 500, 2
	rep.Runs = append(rep.Runs, cas)
	var b strings.Builder
	if err := Markdown(&b, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	tab := section(t, b.String(), "Compare-and-swap contention")
	if len(tab) != 3 {
		t.Fatalf("CAS table has %d lines, want a header, a rule and the one cas run:\n%s", len(tab), strings.Join(tab, "\n"))
	}
	if got := cell(t, tab, "conflicts", "linearizable"); got != "500" {
		t.Errorf("conflicts %q, want 500", got)
	}
	if got := cell(t, tab, "conflict %", "linearizable"); got != "25.0" {
		t.Errorf("conflict %% %q, want 25.0", got)
	}
}

// TestScanTable: runs of the scan mix (YCSB-E) get their own table, with
// the keys returned per scan; other runs stay out of it.
func TestScanTable(t *testing.T) {
	rep := sample()
	sc := rep.Runs[0]
	sc.Mix, sc.ReadPct, sc.Gets, sc.Puts, sc.Scans, sc.ScanKeys = "scan", -2, 950, 50, 950, 47500
	rep.Runs = append(rep.Runs, sc)
	var b strings.Builder
	if err := Markdown(&b, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	tab := section(t, b.String(), "Range scans (YCSB-E)")
	if len(tab) != 3 {
		t.Fatalf("scan table has %d lines, want a header, a rule and the one scan run:\n%s", len(tab), strings.Join(tab, "\n"))
	}
	if got := cell(t, tab, "keys/scan", "linearizable"); got != "50.0" {
		t.Errorf("keys/scan %q, want 50.0", got)
	}
}
