package baseline

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/kvd-project/kvd/bench/result"
)

// ErrPerftest: perftest output had no result rows, or a tool failed.
var ErrPerftest = errors.New("baseline: perftest")

// rttFactor is what perftest divides a measured round trip by for each
// test: SEND and WRITE latency tests ping-pong and report half of it; a
// READ is a round trip by itself.
func rttFactor(kind string) int {
	if kind == result.KindRDMARead {
		return 1
	}
	return 2
}

// kindFromTitle recognises the test a perftest report is for by its title
// line ("RDMA_Read Latency Test", "Send Latency Test").
func kindFromTitle(line string) (string, bool) {
	l := strings.ToLower(line)
	if !strings.Contains(l, "latency test") {
		return "", false
	}
	switch {
	case strings.Contains(l, "rdma_read"):
		return result.KindRDMARead, true
	case strings.Contains(l, "send"):
		return result.KindRDMASend, true
	}
	return "", false
}

// perftest result columns, by the names in its header line.
const (
	colBytes = iota
	colIters
	colMin
	colMax
	colTypical
	colAvg
	colStdev
	colP99
	colP999
	colUnknown
)

// headerColumns maps a perftest header line onto column ids, or returns
// nil if the line is not one. The percentile headers are two words each
// ("99% percentile[usec]").
func headerColumns(line string) []int {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "#bytes" {
		return nil
	}
	var cols []int
	for _, w := range f {
		switch {
		case w == "#bytes":
			cols = append(cols, colBytes)
		case w == "#iterations":
			cols = append(cols, colIters)
		case strings.HasPrefix(w, "t_min"):
			cols = append(cols, colMin)
		case strings.HasPrefix(w, "t_max"):
			cols = append(cols, colMax)
		case strings.HasPrefix(w, "t_typical"):
			cols = append(cols, colTypical)
		case strings.HasPrefix(w, "t_avg"):
			cols = append(cols, colAvg)
		case strings.HasPrefix(w, "t_stdev"):
			cols = append(cols, colStdev)
		case w == "99%":
			cols = append(cols, colP99)
		case w == "99.9%":
			cols = append(cols, colP999)
		case strings.HasPrefix(w, "percentile"):
			// second word of a percentile header
		default:
			cols = append(cols, colUnknown)
		}
	}
	return cols
}

// PerftestOptions say how to label parsed results.
type PerftestOptions struct {
	// Kind is the test, when the output does not say (it usually does).
	Kind string
	// Series labels the results. Default "rdma".
	Series string
	// Source says where the numbers came from (a file name, a command).
	Source string
}

// ParsePerftest reads perftest (ib_read_lat, ib_send_lat) reports, several
// concatenated if need be, and the one-line summaries the RDMA VM's
// perftest step prints ("RDMAVM-PERF: ib_read_lat bytes=2 ..."). Latencies
// become round trips: halved ping-pong figures are doubled.
func ParsePerftest(r io.Reader, o PerftestOptions) ([]result.Baseline, error) {
	if o.Series == "" {
		o.Series = "rdma"
	}
	var out []result.Baseline
	kind, cols := o.Kind, []int(nil)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if k, ok := kindFromTitle(line); ok {
			kind, cols = k, nil
			continue
		}
		if i := strings.Index(line, "RDMAVM-PERF:"); i >= 0 {
			b, err := parseVMLine(line[i+len("RDMAVM-PERF:"):])
			if err != nil {
				return nil, err
			}
			out = append(out, finish(b, o))
			continue
		}
		if c := headerColumns(line); c != nil {
			cols = c
			continue
		}
		if cols == nil {
			continue
		}
		b, ok := parseRow(line, cols)
		if !ok {
			continue
		}
		if kind == "" {
			return nil, fmt.Errorf("%w: result rows but no test title (give the kind)", ErrPerftest)
		}
		b.Kind = kind
		out = append(out, finish(b, o))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no result rows in %s", ErrPerftest, o.Source)
	}
	return out, nil
}

// finish labels b and turns its latencies into round trips.
func finish(b result.Baseline, o PerftestOptions) result.Baseline {
	b.Series, b.Transport, b.Source = o.Series, "rdma", o.Source
	b.RTTFactor = rttFactor(b.Kind)
	f := float64(b.RTTFactor)
	l := &b.Lat
	l.Min, l.Mean, l.P50, l.P90, l.P99, l.P999, l.Max = l.Min*f, l.Mean*f, l.P50*f, l.P90*f, l.P99*f, l.P999*f, l.Max*f
	return b
}

// parseRow reads one result row; ok is false for lines that are not rows.
func parseRow(line string, cols []int) (result.Baseline, bool) {
	f := strings.Fields(line)
	if len(f) < len(cols) {
		return result.Baseline{}, false
	}
	var b result.Baseline
	for i, c := range cols {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			// perftest prints "-nan" for a standard deviation its
			// arithmetic lost (seen at 1 MiB on Soft-RoCE); no figure
			// kvbench keeps.
			if !strings.EqualFold(strings.TrimPrefix(f[i], "-"), "nan") {
				return result.Baseline{}, false
			}
			v = math.NaN()
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			if c == colBytes || c == colIters {
				return result.Baseline{}, false
			}
			continue // a missing figure, not a NaN or Inf in the JSON
		}
		switch c {
		case colBytes:
			b.Bytes = int(v)
		case colIters:
			b.Iters = int64(v)
		case colMin:
			b.Lat.Min = v
		case colMax:
			b.Lat.Max = v
		case colTypical:
			b.Lat.P50 = v
		case colAvg:
			b.Lat.Mean = v
		case colP99:
			b.Lat.P99 = v
		case colP999:
			b.Lat.P999 = v
		}
	}
	if b.Lat.P50 == 0 && b.Lat.Mean == 0 {
		// A row without a central figure (perftest printed inf or nan
		// for them) is no baseline: better none than a zero.
		return result.Baseline{}, false
	}
	b.Lat.Count = b.Iters
	return b, true
}

// parseVMLine reads " ib_read_lat bytes=2 iters=N min=.. typical=.. avg=..
// p99=.. (usec)".
func parseVMLine(s string) (result.Baseline, error) {
	f := strings.Fields(s)
	if len(f) < 2 || (f[0] != result.KindRDMARead && f[0] != result.KindRDMASend) {
		return result.Baseline{}, fmt.Errorf("%w: bad RDMAVM-PERF line %q", ErrPerftest, s)
	}
	b := result.Baseline{Kind: f[0]}
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return result.Baseline{}, fmt.Errorf("%w: bad %s in %q", ErrPerftest, k, s)
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue // missing, as in parseRow
		}
		switch k {
		case "bytes":
			b.Bytes = int(x)
		case "iters":
			b.Iters, b.Lat.Count = int64(x), int64(x)
		case "min":
			b.Lat.Min = x
		case "typical":
			b.Lat.P50 = x
		case "avg":
			b.Lat.Mean = x
		case "p99":
			b.Lat.P99 = x
		case "p999":
			b.Lat.P999 = x
		case "max":
			b.Lat.Max = x
		}
	}
	return b, nil
}

// PerftestConfig says how to run one perftest tool on this machine: its
// server in the background, then its client against Addr.
type PerftestConfig struct {
	// Tool is the command: "ib_read_lat" or "ib_send_lat". Required.
	Tool string
	// Device is the RDMA device ("rxe0"). Required.
	Device string
	// Addr is the address the client connects to (the device's IP, e.g.
	// 127.1.0.1 in the Soft-RoCE VM). Required.
	Addr string
	// Args go to both server and client. Default "-a -n 1000": every size
	// from 2 B to 8 MiB.
	Args []string
	// Tries is how many times the client is started while the server comes
	// up, a second apart. Default 10.
	Tries int
	// Series labels the results. Default "rdma".
	Series string
}

// RunPerftest runs one perftest latency tool and parses its report.
func RunPerftest(ctx context.Context, cfg PerftestConfig) ([]result.Baseline, error) {
	if cfg.Tool == "" || cfg.Device == "" || cfg.Addr == "" {
		return nil, fmt.Errorf("%w: perftest needs a tool, a device and an address", ErrConfig)
	}
	if cfg.Args == nil {
		cfg.Args = []string{"-a", "-n", "1000"}
	}
	if cfg.Tries <= 0 {
		cfg.Tries = 10
	}
	args := append([]string{"-d", cfg.Device}, cfg.Args...)
	var srvOut bytes.Buffer
	srv := exec.CommandContext(ctx, cfg.Tool, args...)
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrPerftest, cfg.Tool, err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = srv.Process.Kill()
			_ = srv.Wait()
		}
	}
	defer stop()

	var last []byte
	for try := 0; try < cfg.Tries; try++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		out, err := exec.CommandContext(ctx, cfg.Tool, append(args, cfg.Addr)...).CombinedOutput()
		if err == nil {
			src := fmt.Sprintf("%s %s %s", cfg.Tool, strings.Join(args, " "), cfg.Addr)
			b, err := ParsePerftest(bytes.NewReader(out), PerftestOptions{Kind: cfg.Tool, Series: cfg.Series, Source: src})
			if err != nil {
				return nil, fmt.Errorf("%w; its output:\n%s", err, bytes.TrimSpace(out))
			}
			return b, nil
		}
		last = out
	}
	stop() // so srvOut is no longer written
	return nil, fmt.Errorf("%w: %s client failed %d times; last output:\n%s\nserver:\n%s",
		ErrPerftest, cfg.Tool, cfg.Tries, last, srvOut.String())
}
