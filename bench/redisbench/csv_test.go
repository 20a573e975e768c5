package redisbench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseCSVReadsRecordedOutput parses redis-benchmark 7.0's --csv
// output as recorded on this machine.
func TestParseCSVReadsRecordedOutput(t *testing.T) {
	for _, tc := range []struct {
		file  string
		tests []string
		first Result
	}{
		{file: "gateway-p1.csv", tests: []string{"SET", "GET", "INCR", "MSET (10 keys)"},
			first: Result{Test: "SET", RPS: 2306.54, AvgMs: 21.070, MinMs: 5.328, P50Ms: 16.151, P95Ms: 53.247, P99Ms: 106.175, MaxMs: 195.583}},
		{file: "redis-p16.csv", tests: []string{"SET", "GET", "INCR", "MSET (10 keys)"},
			first: Result{Test: "SET", RPS: 31007.75, AvgMs: 20.909, MinMs: 0.784, P50Ms: 4.927, P95Ms: 131.839, P99Ms: 170.111, MaxMs: 170.623}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ParseCSV(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.tests) {
				t.Fatalf("%d tests, want %d: %+v", len(got), len(tc.tests), got)
			}
			for i, name := range tc.tests {
				if got[i].Test != name {
					t.Errorf("test %d = %q, want %q", i, got[i].Test, name)
				}
			}
			if got[0] != tc.first {
				t.Errorf("first = %+v, want %+v", got[0], tc.first)
			}
		})
	}
}

// TestParseCSVFindsColumnsByName: the header, not the position, says which
// column is which, and unknown columns are ignored.
func TestParseCSVFindsColumnsByName(t *testing.T) {
	in := `"p99_latency_ms","test","extra","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","max_latency_ms"
"9","GET","x","1000","2","1","3","8","10"
`
	got, err := ParseCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Test: "GET", RPS: 1000, AvgMs: 2, MinMs: 1, P50Ms: 3, P95Ms: 8, P99Ms: 9, MaxMs: 10}
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestParseCSVRefusesBadOutput: output that is not redis-benchmark's CSV
// is an ErrCSV naming the problem, never a panic or a zero row.
func TestParseCSVRefusesBadOutput(t *testing.T) {
	const header = `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"` + "\n"
	line := `"GET","1000","1","1","1","1","1","1"` + "\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty"},
		{"not CSV at all", "WARNING: Could not fetch server CONFIG\n", "no test column"},
		{"no rps column", `"test","avg_latency_ms"` + "\n" + `"GET","1"` + "\n", "no rps column"},
		{"header only", header, "no tests"},
		{"short line", header + `"GET","1000"` + "\n", "2 fields"},
		{"no test name", header + `"","1000","1","1","1","1","1","1"` + "\n", "names no test"},
		{"negative rate", header + `"GET","-5","1","1","1","1","1","1"` + "\n", "rps"},
		{"not a number", header + `"GET","fast","1","1","1","1","1","1"` + "\n", "rps"},
		{"NaN", header + `"GET","1000","NaN","1","1","1","1","1"` + "\n", "avg_latency_ms"},
		{"infinite", header + `"GET","1000","1","1","1","1","1","+Inf"` + "\n", "max_latency_ms"},
		{"too many tests", header + strings.Repeat(line, maxCSVTests+1), "more than 64 tests"},
		{"too long", header + `"GET","1000","1","1","1","1","1","1` + strings.Repeat("0", maxCSVBytes) + `"` + "\n", "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCSV(strings.NewReader(tc.in))
			if !errors.Is(err, ErrCSV) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseCSV = %+v, %v; want ErrCSV saying %q", got, err, tc.want)
			}
		})
	}
}
