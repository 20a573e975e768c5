package redisbench

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvd-project/kvd/bench/stats"
)

// Targets, as the report names them.
const (
	// Gateway is `kvd gateway --redis-listen`: GETs are one-sided reads
	// of the nodes' tables, writes go to the leader.
	Gateway = "kvd-gateway"
	// Node is a kvd node's --redis-listen (node 1, not necessarily the
	// leader).
	Node = "kvd-node"
	// GoFloor is `kvbench resp-floor` (bench/respfloor): a minimal Go
	// server of the protocol answering from a map in its memory, the
	// bound of a Go server on this machine.
	GoFloor = "go-floor"
	// Redis is a redis-server without persistence (--save ""
	// --appendonly no).
	Redis = "redis"
	// RedisAOF is a redis-server with --appendonly yes --appendfsync
	// always: every write is fsynced before its reply, as kvd's are.
	RedisAOF = "redis-aof"
)

// Targets are every target, in the order a run starts them by default:
// kvd's, the Go bound, then Redis'.
func Targets() []string { return []string{Gateway, Node, GoFloor, Redis, RedisAOF} }

// Sample is one redis-benchmark invocation: one test against one target
// at one pipeline depth, in one round.
type Sample struct {
	Round    int
	Target   string
	Pipeline int
	Requests int
	Result
	// ServerCPU is the user+system CPU time of the target's processes
	// (for kvd's targets every node, and the gateway) over the invocation.
	ServerCPU time.Duration
}

// Row is the summary of one (target, pipeline, test) over the rounds.
type Row struct {
	Target   string
	Pipeline int
	Test     string
	Rounds   int
	// RPS is the median over the rounds; MinRPS and MaxRPS their range.
	RPS, MinRPS, MaxRPS float64
	// P50Ms, P99Ms are medians over the rounds of redis-benchmark's
	// percentiles.
	P50Ms, P99Ms float64
	// CPUPerOp is the median over the rounds of ServerCPU / Requests.
	CPUPerOp time.Duration
}

// Summarize groups samples by target, pipeline and test (targets and tests
// in the order they first appear, pipeline depths ascending) and takes the
// medians.
func Summarize(samples []Sample) []Row {
	type key struct {
		target   string
		pipeline int
		test     string
	}
	targetOrder, testOrder := map[string]int{}, map[string]int{}
	groups := map[key][]Sample{}
	var keys []key
	for _, s := range samples {
		if _, ok := targetOrder[s.Target]; !ok {
			targetOrder[s.Target] = len(targetOrder)
		}
		if _, ok := testOrder[s.Test]; !ok {
			testOrder[s.Test] = len(testOrder)
		}
		k := key{s.Target, s.Pipeline, s.Test}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], s)
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(targetOrder[a.target], targetOrder[b.target]), cmp.Compare(a.pipeline, b.pipeline),
			cmp.Compare(testOrder[a.test], testOrder[b.test]))
	})
	rows := make([]Row, 0, len(keys))
	for _, k := range keys {
		g := groups[k]
		rps, p50, p99, cpu := make([]float64, len(g)), make([]float64, len(g)), make([]float64, len(g)), make([]float64, len(g))
		for i, s := range g {
			rps[i], p50[i], p99[i] = s.RPS, s.P50Ms, s.P99Ms
			if s.Requests > 0 {
				cpu[i] = float64(s.ServerCPU) / float64(s.Requests)
			}
		}
		rows = append(rows, Row{Target: k.target, Pipeline: k.pipeline, Test: k.test, Rounds: len(g),
			RPS: stats.Median(rps), MinRPS: slices.Min(rps), MaxRPS: slices.Max(rps),
			P50Ms: stats.Median(p50), P99Ms: stats.Median(p99), CPUPerOp: time.Duration(stats.Median(cpu))})
	}
	return rows
}

// Goal is a ratio of two targets' median rates for one test and pipeline
// depth; Min > 0 is the target kvd is held to, 0 shows the
// ratio without one.
type Goal struct {
	Test     string
	Pipeline int
	Num, Den string
	Min      float64
}

// Goals are the ratios the report gives: kvd's two targets (unpipelined GET
// through the gateway against Redis without persistence; SET against
// Redis with appendfsync always, through the gateway and on a node),
// go-floor's unpipelined GET against Redis beside the gateway's (no
// target: what a Go server answering from its own memory reaches, a bound
// on the gateway's ratio), and kvd's ratios again with -P 16 for
// information.
func Goals() []Goal {
	return []Goal{
		{Test: "GET", Pipeline: 1, Num: Gateway, Den: Redis, Min: 1},
		{Test: "GET", Pipeline: 1, Num: GoFloor, Den: Redis},
		{Test: "SET", Pipeline: 1, Num: Gateway, Den: RedisAOF, Min: 1},
		{Test: "SET", Pipeline: 1, Num: Node, Den: RedisAOF, Min: 1},
		{Test: "GET", Pipeline: 16, Num: Gateway, Den: Redis},
		{Test: "SET", Pipeline: 16, Num: Gateway, Den: RedisAOF},
		{Test: "SET", Pipeline: 16, Num: Node, Den: RedisAOF},
	}
}

// Ratio is a Goal measured: Value is Num's median rate over Den's;
// Measured is false if either side has no row.
type Ratio struct {
	Goal
	Value    float64
	Measured bool
}

// Met reports whether a measured ratio reaches its target (false without
// one).
func (r Ratio) Met() bool { return r.Measured && r.Min > 0 && r.Value >= r.Min }

// Ratios measures goals on rows.
func Ratios(rows []Row, goals []Goal) []Ratio {
	find := func(target string, g Goal) (Row, bool) {
		for _, r := range rows {
			if r.Target == target && r.Pipeline == g.Pipeline && r.Test == g.Test {
				return r, true
			}
		}
		return Row{}, false
	}
	out := make([]Ratio, 0, len(goals))
	for _, g := range goals {
		num, ok1 := find(g.Num, g)
		den, ok2 := find(g.Den, g)
		r := Ratio{Goal: g}
		if ok1 && ok2 && den.RPS > 0 {
			r.Value, r.Measured = num.RPS/den.RPS, true
		}
		out = append(out, r)
	}
	return out
}

// Meta describes a run.
type Meta struct {
	Started                         time.Time
	BenchmarkVersion, ServerVersion string
	Clients, Requests, DataSize     int
	// Keyspace is redis-benchmark's -r; 0: every request uses one key.
	Keyspace int
	Rounds   int
	Nodes    int
	CPUs     int
	// LoadBefore, LoadAfter: /proc/loadavg at the start and the end (the
	// machine may be shared).
	LoadBefore, LoadAfter string
}

// Report is a run's samples, and the invocations that failed.
type Report struct {
	Meta
	Samples []Sample
	Errors  []string
}

// WriteMarkdown writes the summary table and the ratios.
func (r *Report) WriteMarkdown(w io.Writer) error {
	m := r.Meta
	var b strings.Builder
	fmt.Fprintf(&b, "## Redis protocol: redis-benchmark against kvd and Redis\n\n")
	keys := "one key"
	if m.Keyspace > 0 {
		keys = fmt.Sprintf("-r %d", m.Keyspace)
	}
	fmt.Fprintf(&b, "%s; %s. `-c %d -n %d -d %d`, %s, each test a separate invocation; %d rounds, the targets' order rotating "+
		"each round; medians over the rounds. kvd: %d nodes on this host (TCP), the gateway beside them. go-floor: "+
		"`kvbench resp-floor`, a minimal Go server of the protocol answering from its own memory (a bound, not a goal). %d CPUs, "+
		"load average %s at the start, %s at the end (a shared machine: compare rows of one run, not runs).\n\n",
		m.BenchmarkVersion, m.ServerVersion, m.Clients, m.Requests, m.DataSize, keys, m.Rounds, m.Nodes, m.CPUs,
		orDash(m.LoadBefore), orDash(m.LoadAfter))
	if !m.Started.IsZero() {
		fmt.Fprintf(&b, "Run started %s.\n\n", m.Started.UTC().Format(time.RFC3339))
	}
	b.WriteString("| target | -P | test | ops/s | min–max ops/s | p50 ms | p99 ms | server CPU µs/op |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|\n")
	rows := Summarize(r.Samples)
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %.0f–%.0f | %.3f | %.3f | %.1f |\n", row.Target, row.Pipeline, row.Test,
			row.RPS, row.MinRPS, row.MaxRPS, row.P50Ms, row.P99Ms, float64(row.CPUPerOp)/float64(time.Microsecond))
	}
	b.WriteString("\n| ratio of median ops/s | -P | value | target | met |\n|---|--:|--:|---|---|\n")
	for _, q := range Ratios(rows, Goals()) {
		val, target, met := "not measured", "–", "–"
		if q.Measured {
			val = fmt.Sprintf("%.2f×", q.Value)
		}
		if q.Min > 0 {
			target, met = fmt.Sprintf("≥ %.1f×", q.Min), "no"
			if q.Met() {
				met = "yes"
			}
		}
		fmt.Fprintf(&b, "| %s %s / %s | %d | %s | %s | %s |\n", q.Test, q.Num, q.Den, q.Pipeline, val, target, met)
	}
	if len(r.Errors) > 0 {
		b.WriteString("\nFailed invocations (not in the table):\n\n")
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// WriteCSV writes one line per sample.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	_ = cw.Write([]string{"round", "target", "pipeline", "test", "requests", "rps", "avg_ms", "min_ms", "p50_ms", "p95_ms",
		"p99_ms", "max_ms", "server_cpu_us", "server_cpu_us_per_op"})
	for _, s := range r.Samples {
		perOp := 0.0
		if s.Requests > 0 {
			perOp = float64(s.ServerCPU) / float64(time.Microsecond) / float64(s.Requests)
		}
		_ = cw.Write([]string{strconv.Itoa(s.Round), s.Target, strconv.Itoa(s.Pipeline), s.Test, strconv.Itoa(s.Requests),
			f(s.RPS), f(s.AvgMs), f(s.MinMs), f(s.P50Ms), f(s.P95Ms), f(s.P99Ms), f(s.MaxMs),
			f(float64(s.ServerCPU) / float64(time.Microsecond)), strconv.FormatFloat(perOp, 'f', 2, 64)})
	}
	cw.Flush()
	return cw.Error()
}
