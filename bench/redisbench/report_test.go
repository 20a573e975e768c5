package redisbench

import (
	"bytes"
	"encoding/csv"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/report.md from the recorded CSVs")

func sample(round int, target string, depth int, test string, rps float64, cpu time.Duration) Sample {
	return Sample{Round: round, Target: target, Pipeline: depth, Requests: 1000, ServerCPU: cpu,
		Result: Result{Test: test, RPS: rps, P50Ms: rps / 1000, P99Ms: rps / 100}}
}

// TestSummarizeTakesMediansOverRounds: each (target, depth, test) is
// summarized by its median rate, percentiles and CPU per operation, with
// the range of the rates.
func TestSummarizeTakesMediansOverRounds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rates   []float64
		median  float64
		lo, hi  float64
		cpuPerO time.Duration
	}{
		{"one round", []float64{500}, 500, 500, 500, 2 * time.Microsecond},
		{"odd rounds", []float64{300, 100, 200}, 200, 100, 300, 2 * time.Microsecond},
		{"even rounds", []float64{400, 100, 200, 300}, 250, 100, 400, 2 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ss []Sample
			for i, r := range tc.rates {
				ss = append(ss, sample(i+1, Gateway, 1, "GET", r, 2*time.Millisecond))
			}
			rows := Summarize(ss)
			if len(rows) != 1 {
				t.Fatalf("%d rows: %+v", len(rows), rows)
			}
			r := rows[0]
			if r.RPS != tc.median || r.MinRPS != tc.lo || r.MaxRPS != tc.hi || r.Rounds != len(tc.rates) {
				t.Errorf("row %+v, want median %v in %v..%v", r, tc.median, tc.lo, tc.hi)
			}
			if r.P50Ms != tc.median/1000 || r.P99Ms != tc.median/100 {
				t.Errorf("p50 %v p99 %v, want medians %v %v", r.P50Ms, r.P99Ms, tc.median/1000, tc.median/100)
			}
			if r.CPUPerOp != tc.cpuPerO {
				t.Errorf("CPU per op %v, want %v", r.CPUPerOp, tc.cpuPerO)
			}
		})
	}
}

// TestSummarizeOrdersRows: targets and tests in the order they first ran,
// whatever the round's rotation, depths ascending.
func TestSummarizeOrdersRows(t *testing.T) {
	ss := []Sample{
		sample(1, Gateway, 16, "SET", 1, 0), sample(1, Gateway, 1, "SET", 1, 0), sample(1, Gateway, 1, "GET", 1, 0),
		sample(1, Redis, 1, "SET", 1, 0),
		sample(2, Redis, 1, "GET", 1, 0), sample(2, Gateway, 16, "GET", 1, 0),
	}
	var got []string
	for _, r := range Summarize(ss) {
		got = append(got, r.Target+"/"+r.Test+"/"+string(rune('0'+r.Pipeline%10)))
	}
	want := "kvd-gateway/SET/1 kvd-gateway/GET/1 kvd-gateway/SET/6 kvd-gateway/GET/6 redis/SET/1 redis/GET/1"
	if strings.Join(got, " ") != want {
		t.Errorf("order %q, want %q", strings.Join(got, " "), want)
	}
}

// TestRatiosAgainstTargets: a ratio is met only when measured and at or
// above its target; -P 16 ratios have no target.
func TestRatiosAgainstTargets(t *testing.T) {
	get := Goal{Test: "GET", Pipeline: 1, Num: Gateway, Den: Redis, Min: 1}
	info := Goal{Test: "GET", Pipeline: 16, Num: Gateway, Den: Redis}
	for _, tc := range []struct {
		name     string
		goal     Goal
		samples  []Sample
		value    float64
		measured bool
		met      bool
	}{
		{"above", get, []Sample{sample(1, Gateway, 1, "GET", 120, 0), sample(1, Redis, 1, "GET", 100, 0)}, 1.2, true, true},
		{"equal", get, []Sample{sample(1, Gateway, 1, "GET", 100, 0), sample(1, Redis, 1, "GET", 100, 0)}, 1, true, true},
		{"below", get, []Sample{sample(1, Gateway, 1, "GET", 50, 0), sample(1, Redis, 1, "GET", 100, 0)}, 0.5, true, false},
		{"no denominator", get, []Sample{sample(1, Gateway, 1, "GET", 50, 0)}, 0, false, false},
		{"other depth only", get, []Sample{sample(1, Gateway, 16, "GET", 50, 0), sample(1, Redis, 16, "GET", 10, 0)}, 0, false, false},
		{"no target", info, []Sample{sample(1, Gateway, 16, "GET", 200, 0), sample(1, Redis, 16, "GET", 100, 0)}, 2, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := Ratios(Summarize(tc.samples), []Goal{tc.goal})
			if len(rs) != 1 {
				t.Fatalf("%d ratios", len(rs))
			}
			r := rs[0]
			if r.Value != tc.value || r.Measured != tc.measured || r.Met() != tc.met {
				t.Errorf("ratio %+v met %v, want %v measured %v met %v", r, r.Met(), tc.value, tc.measured, tc.met)
			}
		})
	}
}

// recordedReport is a report built from the recorded CSVs: the gateway's
// unpipelined output as two rounds of kvd-gateway, go-floor's as two of
// go-floor, the third as redis at -P 1.
func recordedReport(t *testing.T) *Report {
	t.Helper()
	rep := &Report{Meta: Meta{BenchmarkVersion: "redis-benchmark 7.0.15", ServerVersion: "Redis server v=7.0.15",
		Clients: 50, Requests: 20000, DataSize: 256, Rounds: 2, Nodes: 3, CPUs: 2, LoadBefore: "1.00 2.00 3.00",
		LoadAfter: "4.00 5.00 6.00", Started: time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)}}
	for _, f := range []struct {
		file, target string
	}{{"gateway-p1.csv", Gateway}, {"gofloor-p1.csv", GoFloor}, {"redis-p16.csv", Redis}} {
		b, err := os.ReadFile(filepath.Join("testdata", f.file))
		if err != nil {
			t.Fatal(err)
		}
		res, err := ParseCSV(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for round := 1; round <= 2; round++ {
			for _, r := range res {
				rep.Samples = append(rep.Samples, Sample{Round: round, Target: f.target, Pipeline: 1, Requests: 20000,
					Result: r, ServerCPU: time.Duration(round) * time.Second})
			}
		}
	}
	rep.Errors = []string{"round 2, redis-aof, -P 1, set: redisbench: redis-benchmark failed: exit status 1"}
	return rep
}

// TestWriteMarkdownMatchesGolden renders the recorded report; go test
// -update rewrites testdata/report.md.
func TestWriteMarkdownMatchesGolden(t *testing.T) {
	var b bytes.Buffer
	if err := recordedReport(t).WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.md")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("markdown differs from %s (go test -update rewrites it):\n%s", golden, b.String())
	}
	// go-floor's GET ratio, with no target, right below the gateway's.
	floorRatio := "| GET kvd-gateway / redis | 1 | 0.16× | ≥ 1.0× | no |\n| GET go-floor / redis | 1 | 2.01× | – | – |\n"
	for _, s := range []string{"| kvd-gateway | 1 | GET | 8418 |", "| go-floor | 1 | GET | 105263 |", floorRatio,
		"| SET kvd-gateway / redis-aof | 1 | not measured |", "Failed invocations"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("markdown lacks %q", s)
		}
	}
}

// TestWriteCSVOneLinePerSample: a header, then every sample with its CPU
// per operation.
func TestWriteCSVOneLinePerSample(t *testing.T) {
	rep := recordedReport(t)
	var b bytes.Buffer
	if err := rep.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(rep.Samples)+1 {
		t.Fatalf("%d lines, want %d", len(recs), len(rep.Samples)+1)
	}
	if got := strings.Join(recs[1], ","); got != "1,kvd-gateway,1,SET,20000,2306.54,21.07,5.328,16.151,53.247,106.175,195.583,1000000,50.00" {
		t.Errorf("first sample %q", got)
	}
}
