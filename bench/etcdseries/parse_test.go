package etcdseries

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseReadsTheToolsReports: recorded outputs of etcd's benchmark tool
// (v3.6.8, against etcd 3.4) give each report's rate and percentiles.
func TestParseReadsTheToolsReports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file      string
		report    string
		perSecond float64
		p50, p99  float64
		missing   string // a percentile the report does not have
	}{
		{file: "put.txt", perSecond: 114.57151404046866, p50: 0.001887785, p99: 0.123415896, missing: "99.9"},
		{file: "range.txt", perSecond: 731.2952436187319, p50: 0.001588395, p99: 0.106311135},
		{file: "lease-keepalive-imprecise.txt", perSecond: 1013.1295, p50: 0.0005, p99: 0.0125},
		{file: "watch-latency.txt", report: "Put", perSecond: 75.86092822642824, p50: 0.007882953, missing: "99"},
		// Half the events came before their put returned: timed at zero,
		// which the tool does not print.
		{file: "watch-latency.txt", report: "Watch events", perSecond: 302.7980764040621, p50: 0, missing: "99"},
	} {
		t.Run(tc.file+"/"+tc.report, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			out, err := Parse(f)
			if err != nil {
				t.Fatal(err)
			}
			s, ok := out[tc.report]
			if !ok {
				t.Fatalf("no report %q: %+v", tc.report, out)
			}
			if s.PerSecond != tc.perSecond || s.Percentile["50"] != tc.p50 || s.Errors != 0 {
				t.Errorf("got %v ops/s, p50 %v, %d errors; want %v, %v, 0", s.PerSecond, s.Percentile["50"], s.Errors, tc.perSecond, tc.p50)
			}
			if _, ok := s.Percentile["50"]; !ok {
				t.Errorf("no p50: %v", s.Percentile)
			}
			if tc.p99 != 0 && s.Percentile["99"] != tc.p99 {
				t.Errorf("p99 %v, want %v", s.Percentile["99"], tc.p99)
			}
			if _, ok := s.Percentile[tc.missing]; tc.missing != "" && ok {
				t.Errorf("p%s = %v, want none (too few samples)", tc.missing, s.Percentile[tc.missing])
			}
		})
	}
}

// TestParseErrors: failed requests are counted; output without a report
// is an error, not a zero measurement.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	const summary = "\nSummary:\n  Total:\t1 secs.\n  Requests/sec:\t10\n\nLatency distribution:\n  50% in 0.01 secs.\n"
	for _, tc := range []struct {
		name, in string
		errors   int
		err      error
	}{
		{"errors counted", summary + "\nError distribution:\n  [3]\tetcdserver: request timed out\n  [2]\tcontext deadline exceeded\n", 5, nil},
		{"only errors", "\nError distribution:\n  [7]\trpc error: code = Unavailable\n", 0, ErrNoSummary},
		{"empty", "", 0, ErrNoSummary},
		{"progress bar only", "0 / 200 [____] 0.00% ? p/s\n", 0, ErrNoSummary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Parse(strings.NewReader(tc.in))
			if !errors.Is(err, tc.err) {
				t.Fatalf("Parse = %v, want %v", err, tc.err)
			}
			if err == nil && out[""].Errors != tc.errors {
				t.Errorf("errors = %d, want %d", out[""].Errors, tc.errors)
			}
			if err == nil && tc.errors > 0 && out[""].ErrorText["etcdserver: request timed out"] != 3 {
				t.Errorf("error text %v, want 3 timeouts", out[""].ErrorText)
			}
		})
	}
	if _, err := Parse(strings.NewReader("\nSummary:\n  Requests/sec:\tmany\n")); err == nil || errors.Is(err, ErrNoSummary) {
		t.Errorf("a malformed number: %v, want a parse error", err)
	}
}
