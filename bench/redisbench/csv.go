package redisbench

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Result is one line of redis-benchmark's --csv output: one test (SET,
// GET, "MSET (10 keys)", ...) of one invocation.
type Result struct {
	Test string
	// RPS is requests per second over the whole test.
	RPS float64
	// Latencies in milliseconds, as redis-benchmark reports them.
	AvgMs, MinMs, P50Ms, P95Ms, P99Ms, MaxMs float64
}

// Limits on what ParseCSV reads: one invocation prints a header and a line
// per test.
const (
	maxCSVBytes = 1 << 20
	maxCSVTests = 64
)

// ErrCSV: redis-benchmark's output is not the CSV this package knows.
var ErrCSV = errors.New("redisbench: bad redis-benchmark CSV")

// csvColumns maps redis-benchmark's (7.x) CSV header to Result's fields.
var csvColumns = []struct {
	name string
	set  func(*Result, float64)
}{
	{"rps", func(r *Result, v float64) { r.RPS = v }},
	{"avg_latency_ms", func(r *Result, v float64) { r.AvgMs = v }},
	{"min_latency_ms", func(r *Result, v float64) { r.MinMs = v }},
	{"p50_latency_ms", func(r *Result, v float64) { r.P50Ms = v }},
	{"p95_latency_ms", func(r *Result, v float64) { r.P95Ms = v }},
	{"p99_latency_ms", func(r *Result, v float64) { r.P99Ms = v }},
	{"max_latency_ms", func(r *Result, v float64) { r.MaxMs = v }},
}

// ParseCSV parses redis-benchmark --csv output: a header naming "test" and
// every column of csvColumns (in any order; others are ignored), then one
// line per test. It refuses more than maxCSVBytes or maxCSVTests, and
// numbers that are negative or not finite.
func ParseCSV(r io.Reader) ([]Result, error) {
	lr := &io.LimitedReader{R: r, N: maxCSVBytes + 1}
	cr := csv.NewReader(lr)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: empty", ErrCSV)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCSV, err)
	}
	col := make(map[string]int, len(header))
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	if _, ok := col["test"]; !ok {
		return nil, fmt.Errorf("%w: header %q has no test column", ErrCSV, header)
	}
	for _, c := range csvColumns {
		if _, ok := col[c.name]; !ok {
			return nil, fmt.Errorf("%w: header %q has no %s column", ErrCSV, header, c.name)
		}
	}
	var out []Result
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			if lr.N <= 0 {
				break // cut off by the limit: said below
			}
			return nil, fmt.Errorf("%w: %w", ErrCSV, err)
		}
		if len(out) == maxCSVTests {
			return nil, fmt.Errorf("%w: more than %d tests", ErrCSV, maxCSVTests)
		}
		res, err := parseLine(rec, col, len(header))
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrCSV, maxCSVBytes)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no tests", ErrCSV)
	}
	return out, nil
}

func parseLine(rec []string, col map[string]int, width int) (Result, error) {
	if len(rec) != width {
		return Result{}, fmt.Errorf("%w: line %q has %d fields, the header %d", ErrCSV, rec, len(rec), width)
	}
	res := Result{Test: strings.TrimSpace(rec[col["test"]])}
	if res.Test == "" {
		return Result{}, fmt.Errorf("%w: line %q names no test", ErrCSV, rec)
	}
	for _, c := range csvColumns {
		s := strings.TrimSpace(rec[col[c.name]])
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return Result{}, fmt.Errorf("%w: %s %s: %q is not a number >= 0", ErrCSV, res.Test, c.name, s)
		}
		c.set(&res, v)
	}
	return res, nil
}
