package etcdseries

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kvd-project/kvd/bench/stats"
)

// Cell is a point's medians on one target over the rounds that measured
// it.
type Cell struct {
	PerSecond float64 // median ops/s
	P50, P99  float64 // median percentiles, seconds
	Rounds    int     // successful measurements
	P99Rounds int     // those with enough samples for a p99
	Errors    int     // failed requests, summed over the rounds
}

// Cell returns the medians of point pi on target.
func (r *Result) Cell(pi int, target string) Cell {
	var ops, p50, p99 []float64
	c := Cell{}
	for _, m := range r.Measurements {
		if m.Point != pi || m.Target != target || m.Err != "" {
			continue
		}
		ops = append(ops, m.PerSecond)
		p50 = append(p50, m.Percentile["50"])
		if v, ok := m.Percentile["99"]; ok {
			p99 = append(p99, v)
		}
		c.Errors += m.Errors
	}
	c.Rounds, c.P99Rounds = len(ops), len(p99)
	c.PerSecond, c.P50, c.P99 = stats.Median(ops), stats.Median(p50), stats.Median(p99)
	return c
}

// Goal is one of kvd's goals against etcd: a ratio of a kvd target's median to
// etcd's at one point.
type Goal struct {
	Target  string // the kvd target
	Point   string // workload name
	Clients int
	Latency bool    // compares p50 (at most Want), else ops/s (at least Want)
	Want    float64 // the ratio to reach
}

// Goals are kvd's goals against etcd, through the gateway: linearizable range
// at most clients >= 2x etcd's ops/s and at 1 client p50 <= 1/2 etcd's;
// put at most clients >= 1.5x etcd's ops/s.
func Goals(gateway string, most int) []Goal {
	return []Goal{
		{Target: gateway, Point: "range-l", Clients: most, Want: 2},
		{Target: gateway, Point: "range-l", Clients: 1, Latency: true, Want: 0.5},
		{Target: gateway, Point: "put", Clients: most, Want: 1.5},
	}
}

// Check returns a goal's measured ratio and whether it is met; ok is
// false when either side has no measurement.
func (r *Result) Check(g Goal) (ratio float64, met, ok bool) {
	pi := r.point(g.Point, g.Clients)
	if pi < 0 {
		return 0, false, false
	}
	ref, got := r.Cell(pi, r.Targets[0].Name), r.Cell(pi, g.Target)
	if ref.Rounds == 0 || got.Rounds == 0 {
		return 0, false, false
	}
	if g.Latency {
		if ref.P50 == 0 {
			return 0, false, false
		}
		ratio = got.P50 / ref.P50
		return ratio, ratio <= g.Want, true
	}
	if ref.PerSecond == 0 {
		return 0, false, false
	}
	ratio = got.PerSecond / ref.PerSecond
	return ratio, ratio >= g.Want, true
}

func (r *Result) point(name string, clients int) int {
	for i, p := range r.Points {
		if p.Name == name && p.Clients == clients {
			return i
		}
	}
	return -1
}

// WriteMarkdown writes the table: a row per point and target with the
// medians and their ratios to the reference target's, then the goals.
func (r *Result) WriteMarkdown(w io.Writer, goals []Goal) error {
	var b strings.Builder
	ref := r.Targets[0].Name
	b.WriteString("| workload | clients | target | ops/s | p50 ms | p99 ms | ops/s vs " + ref + " | p50 vs " + ref + " | rounds | failed requests |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for pi, p := range r.Points {
		base := r.Cell(pi, ref)
		for _, t := range r.Targets {
			c := r.Cell(pi, t.Name)
			ops, opsRatio := num(c.PerSecond, c.Rounds), ratio(c.PerSecond, base.PerSecond, c.Rounds, base.Rounds)
			if p.NoRate {
				ops, opsRatio = "–", "–"
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %d/%d | %d |\n", p.Name, p.Clients, t.Name,
				ops, ms(c.P50, c.Rounds), ms(c.P99, c.P99Rounds), opsRatio, ratio(c.P50, base.P50, c.Rounds, base.Rounds),
				c.Rounds, r.Rounds, c.Errors)
		}
	}
	var failed []string
	for _, m := range r.Measurements {
		for msg, n := range m.ErrorText {
			p := r.Points[m.Point]
			failed = append(failed, fmt.Sprintf("* round %d, %s at %d client%s, %s: %d × %s\n", m.Round, p.Name, p.Clients, plural(p.Clients), m.Target, n, msg))
		}
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		b.WriteString("\nFailed requests (the tool counts them apart from the rates and latencies):\n\n" + strings.Join(failed, ""))
	}
	if len(goals) > 0 {
		b.WriteString("\n| goal | measured | met |\n|---|---:|---|\n")
		for _, g := range goals {
			rt, met, ok := r.Check(g)
			fmt.Fprintf(&b, "| %s | %s | %s |\n", g.String(ref), ratioText(rt, ok), verdict(met, ok))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String says the goal in words, e.g. "kvd gateway range-l, 64 clients:
// ops/s >= 2x etcd's".
func (g Goal) String(ref string) string {
	what := fmt.Sprintf("ops/s >= %gx %s's", g.Want, ref)
	if g.Latency {
		what = fmt.Sprintf("p50 <= %gx %s's", g.Want, ref)
	}
	return fmt.Sprintf("%s %s, %d client%s: %s", g.Target, g.Point, g.Clients, plural(g.Clients), what)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func num(v float64, rounds int) string {
	if rounds == 0 {
		return "–"
	}
	return thousands(int64(v + 0.5))
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func ms(sec float64, rounds int) string {
	if rounds == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", sec*1e3)
}

func ratio(v, base float64, rounds, baseRounds int) string {
	return ratioText(v/base, rounds > 0 && baseRounds > 0 && base > 0)
}

func ratioText(r float64, ok bool) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f×", r)
}

func verdict(met, ok bool) string {
	switch {
	case !ok:
		return "not measured"
	case met:
		return "yes"
	}
	return "**no**"
}
