package etcdseries

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// fakeTool stands in for etcd's benchmark tool: it reports, for each
// target (by its first endpoint), the rates and p50s of rounds in turn,
// and records the targets in the order they were run.
type fakeTool struct {
	rates map[string][]float64 // by endpoint, one per call
	p50s  map[string][]float64
	fail  map[string]int // the call of an endpoint that fails (1-based)
	calls map[string]int
	order []string
}

func (f *fakeTool) exec(_ context.Context, _ string, args []string) ([]byte, error) {
	ep := args[slices.Index(args, "--endpoints")+1]
	ep, _, _ = strings.Cut(ep, ",")
	f.order = append(f.order, ep)
	f.calls[ep]++
	n := f.calls[ep]
	if f.fail[ep] == n {
		return nil, errors.New("exit status 1")
	}
	rate, p50 := f.rates[ep][(n-1)%len(f.rates[ep])], f.p50s[ep][(n-1)%len(f.p50s[ep])]
	s := fmt.Sprintf("\nSummary:\n  Total:\t1 secs.\n  Requests/sec:\t%v\n\nLatency distribution:\n  50%% in %v secs.\n  99%% in %v secs.\n", rate, p50, 2*p50)
	if slices.Contains(args, "watch-latency") {
		// Its put report first, with other numbers.
		s = "\nPut summary:\n\nSummary:\n  Requests/sec:\t7\n\nLatency distribution:\n  50% in 9 secs.\n\nWatch events summary:\n" + s
	}
	return []byte("0 / 10 [___]\n" + s), nil
}

func targets() []Target {
	return []Target{{"etcd", []string{"e1", "e2", "e3"}}, {"kvd nodes", []string{"n1", "n2", "n3"}}, {"kvd gateway", []string{"g"}}}
}

// TestRunTurnsTheTargetOrderEveryRound: round r starts every point at
// target r, so no target always runs first.
func TestRunTurnsTheTargetOrderEveryRound(t *testing.T) {
	t.Parallel()
	f := &fakeTool{rates: map[string][]float64{"e1": {1}, "n1": {1}, "g": {1}}, p50s: map[string][]float64{"e1": {1}, "n1": {1}, "g": {1}}, calls: map[string]int{}}
	res, err := Run(context.Background(), Config{Benchmark: "b", Targets: targets(), Rounds: 3, Clients: []int{1}, Knobs: Knobs{Exec: f.exec}})
	if err != nil {
		t.Fatal(err)
	}
	per := len(res.Points) * 3
	for r, want := range [][]string{{"e1", "n1", "g"}, {"n1", "g", "e1"}, {"g", "e1", "n1"}} {
		for p := range len(res.Points) {
			if got := f.order[r*per+p*3 : r*per+p*3+3]; !slices.Equal(got, want) {
				t.Errorf("round %d point %d ran %v, want %v", r+1, p, got, want)
			}
		}
	}
	if len(res.Measurements) != per*3 {
		t.Errorf("%d measurements, want %d", len(res.Measurements), per*3)
	}
}

// TestTableGivesMediansRatiosAndGoals: each cell is the median of the
// rounds, ratios divide by etcd's medians, and the goals say met or not.
func TestTableGivesMediansRatiosAndGoals(t *testing.T) {
	t.Parallel()
	f := &fakeTool{
		// Each point runs once per round on each target: calls cycle
		// through the points, so give every point the same three rounds.
		rates: map[string][]float64{"e1": {100}, "n1": {150}, "g": {300}},
		p50s:  map[string][]float64{"e1": {0.004}, "n1": {0.003}, "g": {0.001}},
		calls: map[string]int{},
	}
	cfg := Config{Benchmark: "b", Targets: targets(), Rounds: 3, Clients: []int{1, 64}, Knobs: Knobs{Exec: f.exec}}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Make one point's rounds differ: the median, not the mean, counts.
	pi := res.point("put", 64)
	for i, m := range res.Measurements {
		if m.Point == pi && m.Target == "kvd gateway" {
			res.Measurements[i].PerSecond = []float64{120, 1000, 160}[m.Round-1]
		}
	}
	for i, m := range res.Measurements {
		if m.Point == pi && m.Target == "kvd nodes" && m.Round == 2 {
			res.Measurements[i].Errors, res.Measurements[i].ErrorText = 2, map[string]int{"etcdserver: request timed out": 2}
		}
	}
	var b strings.Builder
	if err := res.WriteMarkdown(&b, Goals("kvd gateway", 64)); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| range-l | 64 | etcd | 100 | 4.000 | 8.000 | 1.00× | 1.00× | 3/3 | 0 |",
		"| range-l | 64 | kvd nodes | 150 | 3.000 | 6.000 | 1.50× | 0.75× | 3/3 | 0 |",
		"| range-l | 1 | kvd gateway | 300 | 1.000 | 2.000 | 3.00× | 0.25× | 3/3 | 0 |",
		"| put | 64 | kvd gateway | 160 | 1.000 | 2.000 | 1.60× | 0.25× | 3/3 | 0 |",
		"| watch-latency | 1 | kvd gateway | – | 1.000 | 2.000 | – | 0.25× | 3/3 | 0 |",
		"| put | 64 | kvd nodes | 150 | 3.000 | 6.000 | 1.50× | 0.75× | 3/3 | 2 |",
		"* round 2, put at 64 clients, kvd nodes: 2 × etcdserver: request timed out\n",
		"| kvd gateway range-l, 64 clients: ops/s >= 2x etcd's | 3.00× | yes |",
		"| kvd gateway range-l, 1 client: p50 <= 0.5x etcd's | 0.25× | yes |",
		"| kvd gateway put, 64 clients: ops/s >= 1.5x etcd's | 1.60× | yes |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	for i, m := range res.Measurements {
		if m.Point == pi && m.Target == "kvd gateway" {
			res.Measurements[i].PerSecond = 140
		}
	}
	if r, met, ok := res.Check(Goals("kvd gateway", 64)[2]); !ok || met || r != 1.4 {
		t.Errorf("put at 1.4x etcd: ratio %v met %v ok %v, want 1.4, not met", r, met, ok)
	}
}

// TestRunKeepsGoingAfterAFailure: a failed measurement is kept with its
// error, the others are measured, the cell counts its rounds, and Run
// says what failed.
func TestRunKeepsGoingAfterAFailure(t *testing.T) {
	t.Parallel()
	f := &fakeTool{rates: map[string][]float64{"e1": {100}, "n1": {100}, "g": {100}}, p50s: map[string][]float64{"e1": {0.001}, "n1": {0.001}, "g": {0.001}},
		fail: map[string]int{"g": 1}, calls: map[string]int{}}
	res, err := Run(context.Background(), Config{Benchmark: "b", Targets: targets(), Rounds: 2, Clients: []int{1}, Knobs: Knobs{Exec: f.exec}})
	if err == nil || !strings.Contains(err.Error(), "round 1 put/1 on kvd gateway") {
		t.Fatalf("Run = %v, want it to name the failed measurement", err)
	}
	if c := res.Cell(0, "kvd gateway"); c.Rounds != 1 {
		t.Errorf("cell of the failed point has %d rounds, want 1", c.Rounds)
	}
	if want := 2 * len(res.Points) * 3; len(res.Measurements) != want {
		t.Errorf("%d measurements, want %d", len(res.Measurements), want)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Benchmark: "b", Targets: targets()}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no tool", func(c *Config) { c.Benchmark = "" }, false},
		{"one target", func(c *Config) { c.Targets = c.Targets[:1] }, false},
		{"target without endpoints", func(c *Config) { c.Targets = []Target{{"a", []string{"x"}}, {"b", nil}} }, false},
		{"zero clients", func(c *Config) { c.Clients = []int{1, 0} }, false},
		{"negative rounds", func(c *Config) { c.Rounds = -1 }, false},
		{"negative scale", func(c *Config) { c.Scale = -1 }, false},
	} {
		c := ok
		c.Targets = slices.Clone(ok.Targets)
		tc.edit(&c)
		if err := c.Validate(); (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v", tc.name, err)
		}
	}
}

// TestPlanCoversEveryWorkload: every workload at every client count with
// the same flags on every target, totals scaled, and the watch point.
func TestPlanCoversEveryWorkload(t *testing.T) {
	t.Parallel()
	ps := Plan(Config{Clients: []int{1, 64}, Scale: 0.5})
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s/%d/%d %s", p.Name, p.Clients, p.Conns, strings.Join(p.Args, " ")))
	}
	for _, want := range []string{
		"put/1/1 put --total=150 --key-size 8 --val-size 256 --key-space-size 10000",
		"put/64/8 put --total=1500 --key-size 8 --val-size 256 --key-space-size 10000",
		"range-l/64/8 range " + RangeKey + " --total=5000 --consistency l",
		"range-s/1/1 range " + RangeKey + " --total=500 --consistency s",
		"txn-put/64/8 txn-put --total=1500 --txn-ops 1 --key-size 8 --val-size 256 --key-space-size 10000",
		"lease-keepalive/1/1 lease-keepalive --total=500",
		"watch-latency/1/1 watch-latency --streams 10 --watchers-per-stream 10 --put-total 200 --put-rate 100 --key-size 8 --val-size 256",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("plan lacks %q:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if len(ps) != 5*2+1 {
		t.Errorf("%d points, want 11", len(ps))
	}
}

// TestLastLinesDropsTheProgressBar: a failure's message keeps the tool's
// last words, not its redrawn progress bar.
func TestLastLinesDropsTheProgressBar(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"0 / 10 [___] 0.00% ? p/s\r5 / 10 [-->_] 50.00% 12 p/s\nError: context deadline exceeded\n", "Error: context deadline exceeded"},
		{"a\nb\nc\nd\ne\nf\ng\n", "c\nd\ne\nf\ng"},
	} {
		if got := lastLines(tc.in, 5); got != tc.want {
			t.Errorf("lastLines(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
