package result

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/bench/latency"
)

func sampleRun() Run {
	return Run{
		Series: "tcp", Transport: "tcp", Mix: "95/5", ReadPct: 95, Consistency: "linearizable", Dist: "zipf",
		Keys: 1000, KeySize: 16, ValueSize: 256, Mode: "closed", Clients: 16, Conns: 4, Seconds: 2.0003,
		Ops: 20000, Gets: 19000, Puts: 1000, Errors: 2, Misses: 1, Throughput: 9998.5,
		Lat:        latency.Summary{Count: 20000, Mean: 80.5, Min: 20.1, P50: 70, P90: 120, P99: 400.25, P999: 900, Max: 1500},
		GetLat:     latency.Summary{Count: 19000, Mean: 60, Min: 20.1, P50: 55, P90: 90, P99: 150, P999: 300, Max: 700},
		PutLat:     latency.Summary{Count: 1000, Mean: 500, Min: 200, P50: 450, P90: 800, P99: 1200, P999: 1500, Max: 1500},
		CDF:        []latency.Point{{Pct: 0, Us: 20.1}, {Pct: 100, Us: 1500}},
		ClientGets: 19000, OneSidedRounds: 20000, OneSidedReads: 90000, OneSidedBytes: 7200000, RPCGets: 1000, Fallbacks: 3, Retries: 5,
		RetryReasons: map[string]uint64{"torn": 2, "stale": 3},
		ServerCPU:    0.5, ServerCPUPerOp: 25, ServerCPUNetPerOp: 20, ServerPIDs: 3, Note: "a, \"quoted\" note",
	}
}

func sampleReport() *Report {
	return &Report{
		Schema: SchemaVersion,
		Meta:   []Meta{{Series: "tcp", Host: "h", CPUs: 2, GoVersion: "go1.26", Started: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}},
		Runs:   []Run{sampleRun()},
		Baselines: []Baseline{
			{Series: "tcp", Transport: "tcp", Kind: KindTCPRead, Bytes: 256, Iters: 1000, RTTFactor: 1,
				Lat: latency.Summary{Count: 1000, P50: 25, P99: 50}},
			{Series: "tcp", Transport: "tcp", Kind: KindTCPWrite, Bytes: 256, Iters: 1000, RTTFactor: 1,
				Lat: latency.Summary{Count: 1000, P50: 30, P99: 60}},
		},
	}
}

func TestDerived(t *testing.T) {
	r := sampleRun()
	if got := r.OneSidedGets(); got != 18000 {
		t.Errorf("OneSidedGets = %d", got)
	}
	if got := r.RoundsPerGet(); got != 21000.0/19000 {
		t.Errorf("RoundsPerGet = %v", got)
	}
	if got := r.RoundsPerOneSidedGet(); got != 20000.0/18000 {
		t.Errorf("RoundsPerOneSidedGet = %v", got)
	}
	if got := r.ReadsPerOneSidedGet(); got != 5 {
		t.Errorf("ReadsPerOneSidedGet = %v", got)
	}
	if got := r.BytesPerOneSidedGet(); got != 400 {
		t.Errorf("BytesPerOneSidedGet = %v", got)
	}
	var empty Run
	if empty.RoundsPerGet() != 0 || empty.RoundsPerOneSidedGet() != 0 || empty.ReadsPerOneSidedGet() != 0 || empty.BytesPerOneSidedGet() != 0 {
		t.Error("empty run has round trips")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	rep := sampleReport()
	rep.ComputeRatios()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rep) {
		t.Errorf("round trip changed the report:\n got %+v\nwant %+v", got, rep)
	}
}

func TestReadJSONRejects(t *testing.T) {
	for _, in := range []string{`{"schema": 99}`, `{"schema": 0}`, `not json`} {
		if _, err := ReadJSON(strings.NewReader(in)); !errors.Is(err, ErrFormat) {
			t.Errorf("ReadJSON(%q) = %v, want ErrFormat", in, err)
		}
	}
}

func TestCSVRoundTrip(t *testing.T) {
	rep := sampleReport()
	rep.ComputeRatios()
	var buf bytes.Buffer
	if err := WriteRunsCSV(&buf, rep.Runs); err != nil {
		t.Fatal(err)
	}
	header := strings.SplitN(buf.String(), "\n", 2)[0]
	for _, col := range []string{"throughput", "lat_p50_us", "lat_p999_us", "get_x_base_p50", "rounds_per_get", "reads_per_one_sided_get", "bytes_per_one_sided_get", "one_sided_reads", "server_cpu_us_per_op"} {
		if !strings.Contains(","+header+",", ","+col+",") {
			t.Errorf("CSV header lacks %s: %s", col, header)
		}
	}
	got, err := ReadRunsCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := rep.Runs[0]
	want.CDF, want.Ratios = nil, nil // JSON only, and derived
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("CSV round trip:\n got %+v\nwant %+v", got, want)
	}

	buf.Reset()
	if err := WriteBaselinesCSV(&buf, rep.Baselines); err != nil {
		t.Fatal(err)
	}
	bases, err := ReadBaselinesCSV(&buf)
	if err != nil || !reflect.DeepEqual(bases, rep.Baselines) {
		t.Errorf("baseline CSV round trip: %v\n got %+v\nwant %+v", err, bases, rep.Baselines)
	}
	if _, err := ReadRunsCSV(strings.NewReader("bogus,columns\n1,2\n")); !errors.Is(err, ErrFormat) {
		t.Errorf("foreign CSV: %v", err)
	}
}

func TestExtractFromConsole(t *testing.T) {
	rep := sampleReport()
	var marked bytes.Buffer
	if err := WriteMarked(&marked, rep); err != nil {
		t.Fatal(err)
	}
	// A serial console adds \r, and other output surrounds the block.
	console := "RDMAVM-READY: kernel 6.1\r\nnoise\r\n" + strings.ReplaceAll(marked.String(), "\n", "\r\n") + "RDMAVM-VERDICT: PASS x\r\n"
	dir := t.TempDir()
	path := filepath.Join(dir, "console.log")
	if err := os.WriteFile(path, []byte(console), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Runs) != 1 || got.Runs[0].Throughput != rep.Runs[0].Throughput || len(got.Baselines) != 2 {
		t.Errorf("extracted %+v", got)
	}
	if _, err := Extract(strings.NewReader(BeginMarker + "\n{\n")); !errors.Is(err, ErrFormat) {
		t.Errorf("cut-short block: %v", err)
	}
	if err := os.WriteFile(path, []byte("nothing here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); !errors.Is(err, ErrFormat) {
		t.Errorf("file without a report: %v", err)
	}
}

func TestMergeAndSeries(t *testing.T) {
	a := sampleReport()
	b := sampleReport()
	b.Meta[0].Series = "rdma"
	b.Runs[0].Series, b.Runs[0].Transport = "rdma", "rdma"
	b.Baselines = []Baseline{{Series: "rdma", Transport: "rdma", Kind: KindRDMARead, Bytes: 2}}
	m := Merge(a, b)
	if len(m.Meta) != 2 || len(m.Runs) != 2 || len(m.Baselines) != 3 {
		t.Fatalf("merged %d meta, %d runs, %d baselines", len(m.Meta), len(m.Runs), len(m.Baselines))
	}
	if s := m.Series(); !reflect.DeepEqual(s, []string{"tcp", "rdma"}) {
		t.Errorf("Series = %v", s)
	}
}

func TestFindBaseline(t *testing.T) {
	bases := []Baseline{
		{Series: "tcp", Transport: "tcp", Kind: KindTCPRead, Bytes: 16},
		{Series: "tcp", Transport: "tcp", Kind: KindTCPRead, Bytes: 4096},
		{Series: "tcp", Transport: "tcp", Kind: KindTCPWrite, Bytes: 256},
		{Series: "other", Transport: "tcp", Kind: KindTCPRead, Bytes: 256},
		{Series: "rdma", Transport: "rdma", Kind: KindRDMARead, Bytes: 2},
		{Series: "rdma", Transport: "rdma", Kind: KindRDMARead, Bytes: 256},
		{Series: "rdma", Transport: "rdma", Kind: KindRDMASend, Bytes: 256},
	}
	for _, tc := range []struct {
		name      string
		run       Run
		op        string
		kind      string
		bytes     int
		series    string
		wantFound bool
	}{
		{"tcp get prefers own series over exact size", Run{Series: "tcp", Transport: "tcp", ValueSize: 256}, "get", KindTCPRead, 4096, "tcp", true},
		{"tcp get nearest on log scale", Run{Series: "tcp", Transport: "tcp", ValueSize: 100}, "get", KindTCPRead, 16, "tcp", true},
		{"tcp get falls back to another series", Run{Series: "x", Transport: "tcp", ValueSize: 256}, "get", KindTCPRead, 256, "other", true},
		{"tcp put", Run{Series: "tcp", Transport: "tcp", ValueSize: 64}, "put", KindTCPWrite, 256, "tcp", true},
		{"rdma one-sided get is a READ", Run{Series: "rdma", Transport: "rdma", ValueSize: 200, Consistency: "linearizable"}, "get", KindRDMARead, 256, "rdma", true},
		{"rdma readindex get is a SEND", Run{Series: "rdma", Transport: "rdma", ValueSize: 200, Consistency: "readindex"}, "get", KindRDMASend, 256, "rdma", true},
		{"no baseline for transport", Run{Series: "q", Transport: "quic", ValueSize: 16}, "get", "", 0, "", false},
	} {
		b, ok := FindBaseline(&tc.run, tc.op, bases)
		if ok != tc.wantFound || b.Kind != tc.kind || b.Bytes != tc.bytes || b.Series != tc.series {
			t.Errorf("%s: got %+v found=%v", tc.name, b, ok)
		}
	}
}

func TestRatios(t *testing.T) {
	rep := sampleReport()
	rep.ComputeRatios()
	r := rep.Runs[0]
	if len(r.Ratios) != 2 {
		t.Fatalf("ratios %+v", r.Ratios)
	}
	for _, tc := range []struct {
		op       string
		p50, p99 float64
	}{{"get", 55.0 / 25, 150.0 / 50}, {"put", 450.0 / 30, 1200.0 / 60}} {
		x, ok := r.RatioFor(tc.op)
		if !ok || x.P50 != tc.p50 || x.P99 != tc.p99 {
			t.Errorf("%s ratio = %+v, want p50 %v p99 %v", tc.op, x, tc.p50, tc.p99)
		}
	}
	// A baseline without a p99 (old perftest) gives no p99 ratio, not Inf.
	rep.Baselines[0].Lat.P99 = 0
	rep.Runs[0].Puts = 0
	rep.ComputeRatios()
	if x := rep.Runs[0].Ratios; len(x) != 1 || x[0].P99 != 0 || x[0].P50 == 0 {
		t.Errorf("ratios without baseline p99 / without PUTs: %+v", x)
	}
}
