package baseline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/bench/result"
)

func TestTCP(t *testing.T) {
	bases, err := TCP(context.Background(), TCPConfig{Sizes: []int{16, 65536}, Iters: 300})
	if err != nil {
		t.Fatal(err)
	}
	if len(bases) != 4 {
		t.Fatalf("%d baselines for 2 sizes x 2 shapes", len(bases))
	}
	seen := map[string]bool{}
	for _, b := range bases {
		seen[b.Kind+"/"+strconv.Itoa(b.Bytes)] = true
		if b.Transport != "tcp" || b.Series != "tcp" || b.Iters != 300 || b.Lat.Count != 300 || b.RTTFactor != 1 {
			t.Errorf("baseline %+v", b)
		}
		if !(b.Lat.Min > 0 && b.Lat.Min <= b.Lat.P50 && b.Lat.P50 <= b.Lat.P99 && b.Lat.P99 <= b.Lat.Max) {
			t.Errorf("latencies out of order: %+v", b.Lat)
		}
	}
	for _, k := range []string{"tcp-read/16", "tcp-write/16", "tcp-read/65536", "tcp-write/65536"} {
		if !seen[k] {
			t.Errorf("no %s baseline in %v", k, seen)
		}
	}
}

func TestTCPValidateAndCancel(t *testing.T) {
	for _, cfg := range []TCPConfig{{}, {Sizes: []int{-1}}, {Sizes: []int{1 << 30}}} {
		if _, err := TCP(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("TCP(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := TCP(ctx, TCPConfig{Sizes: []int{16}, Iters: 1 << 30}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled TCP = %v", err)
	}
}

// A report in the shape perftest prints: a title, a settings block, a
// header with two-word percentile columns, and one row per size.
const readReport = `
---------------------------------------------------------------------------------------
                    RDMA_Read Latency Test
 Dual-port       : OFF          Device         : rxe0
 Number of qps   : 1            Transport type : IB
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
 2       1000          10.10          80.00        12.50               13.00          2.00            30.00                  70.00
 4096    1000          20.00          90.00        24.00               25.00          3.00            40.00                  85.00
 1048576 300          17400.46        179866.86      25417.66  	       28973.07     	-nan   		131907.06 		179866.86
 8388608 10          1.00        inf      2.00  	       3.00     	nan   		4.00 		inf
 16 300          inf        inf      inf  	       -nan     	-nan   		inf 		inf
---------------------------------------------------------------------------------------
`

const sendReport = `
                    Send Latency Test
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]
 2       500           4.00           9.00         5.00
`

func TestParsePerftest(t *testing.T) {
	t.Parallel()
	bases, err := ParsePerftest(strings.NewReader(readReport+sendReport+
		"RDMAVM-PERF: ib_read_lat bytes=2 iters=2000 min=5.2 typical=5.5 avg=5.7 p99=10.5 (usec)\r\n"),
		PerftestOptions{Source: "x"})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind            string
		bytes           int
		iters           int64
		factor          int
		p50, p99, p999  float64
		mean, min, maxv float64
	}{
		{result.KindRDMARead, 2, 1000, 1, 12.5, 30, 70, 13, 10.1, 80},
		{result.KindRDMARead, 4096, 1000, 1, 24, 40, 85, 25, 20, 90},
		{result.KindRDMARead, 1 << 20, 300, 1, 25417.66, 131907.06, 179866.86, 28973.07, 17400.46, 179866.86}, // stdev -nan
		{result.KindRDMARead, 8 << 20, 10, 1, 2, 4, 0, 3, 1, 0},                                               // inf left out
		{result.KindRDMASend, 2, 500, 2, 10, 0, 0, 0, 8, 18},                                                  // halved ping-pong doubled
		{result.KindRDMARead, 2, 2000, 1, 5.5, 10.5, 0, 5.7, 5.2, 0},
	}
	if len(bases) != len(want) {
		t.Fatalf("got %d baselines: %+v", len(bases), bases)
	}
	for i, w := range want {
		b := bases[i]
		if b.Kind != w.kind || b.Bytes != w.bytes || b.Iters != w.iters || b.Lat.Count != w.iters || b.RTTFactor != w.factor ||
			b.Lat.P50 != w.p50 || b.Lat.P99 != w.p99 || b.Lat.P999 != w.p999 || b.Lat.Mean != w.mean ||
			b.Lat.Min != w.min || b.Lat.Max != w.maxv || b.Transport != "rdma" || b.Series != "rdma" || b.Source != "x" {
			t.Errorf("row %d: got %+v, want %+v", i, b, w)
		}
	}
}

func TestParsePerftestErrors(t *testing.T) {
	t.Parallel()
	rows := " #bytes #iterations t_min[usec] t_max[usec] t_typical[usec]\n 2 10 1 2 1.5\n"
	if _, err := ParsePerftest(strings.NewReader(rows), PerftestOptions{}); !errors.Is(err, ErrPerftest) {
		t.Errorf("rows without a title: %v", err)
	}
	if b, err := ParsePerftest(strings.NewReader(rows), PerftestOptions{Kind: result.KindRDMARead}); err != nil || len(b) != 1 {
		t.Errorf("rows with a kind hint: %v, %v", b, err)
	}
	if _, err := ParsePerftest(strings.NewReader("Couldn't connect to 127.1.0.1:18515\n"), PerftestOptions{}); !errors.Is(err, ErrPerftest) {
		t.Errorf("failed run: %v", err)
	}
	if _, err := ParsePerftest(strings.NewReader("RDMAVM-PERF: ib_read_lat bytes=x\n"), PerftestOptions{}); !errors.Is(err, ErrPerftest) {
		t.Errorf("bad VM line: %v", err)
	}
}

// TestRunPerftest runs a stand-in for ib_read_lat: as a server it waits to
// be killed; as a client (given an address) it prints a report.
func TestRunPerftest(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report")
	if err := os.WriteFile(report, []byte(readReport), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(dir, "fake_read_lat")
	script := "#!/bin/sh\n" +
		"for a; do last=$a; done\n" +
		"case $last in 127.*) cat " + report + ";; *) exec sleep 30;; esac\n"
	if err := os.WriteFile(tool, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	bases, err := RunPerftest(context.Background(), PerftestConfig{Tool: tool, Device: "rxe0", Addr: "127.1.0.1", Tries: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(bases) != 4 || bases[0].Kind != result.KindRDMARead || !strings.Contains(bases[0].Source, "-d rxe0 -a -n 1000 127.1.0.1") {
		t.Errorf("got %+v", bases)
	}
	if _, err := RunPerftest(context.Background(), PerftestConfig{Tool: tool}); !errors.Is(err, ErrConfig) {
		t.Errorf("no device: %v", err)
	}
}
