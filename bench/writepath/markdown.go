package writepath

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteMarkdown writes the summary table, what each point runs, every
// round's values, and the failed points if any.
func (r *Report) WriteMarkdown(w io.Writer) error {
	m := r.Meta
	var b strings.Builder
	b.WriteString("## Write path: the floors and kvd, side by side\n\n")
	fmt.Fprintf(&b, "%d clients, each with its own connection and one PUT in flight; %d keys, %d B values; %.3g s points "+
		"after %.3g s of warm-up; on each kvd cluster, after that, one client's PUTs for as long. Rounds: %d, the order "+
		"rotated each round; medians over the rounds. %d CPUs, load average %s at the start, %s at the end (a shared "+
		"machine: compare rows of one run, not runs).\n\n",
		m.Clients, m.Keys, m.ValueSize, m.Seconds, m.WarmupSeconds, m.Rounds, m.CPUs, orDash(m.LoadBefore), orDash(m.LoadAfter))
	if !m.Started.IsZero() {
		fmt.Fprintf(&b, "Run from %s to %s.\n\n", m.Started.Format(time.RFC3339), m.Finished.Format(time.RFC3339))
	}
	b.WriteString("| point | server CPU µs/PUT | × floor | PUTs/s | × baseline | one-client PUT p50 µs | × baseline |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|\n")
	for _, row := range r.Summary() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", row.Point, num(row.Median.CPUPerPut, 1),
			times(row.CPUOverFloor), num(row.Median.PutsPerSec, 0), times(row.PutsOverBaseline), num(row.Median.P50, 0),
			times(row.P50OverBaseline))
	}
	b.WriteString("\n× floor: the point's median server CPU per PUT over the floor's. × baseline: a kvd point's median " +
		"PUTs/s, and its median one-client p50, over the baseline build's (throughput above 1 and p50 below 1 are " +
		"gains).\n\n")
	for _, p := range r.Points {
		fmt.Fprintf(&b, "- %s (%s): %s\n", p.Name, p.Role, orDash(p.Detail))
	}
	b.WriteString("\n### Rounds\n\nEach measurement in the order run; its ratios are to the floor and the baseline of the same round.\n\n")
	b.WriteString("| round | # | point | server CPU µs/PUT | × floor | PUTs/s | × baseline | one-client PUT p50 µs | × baseline |\n")
	b.WriteString("|--:|--:|---|--:|--:|--:|--:|--:|--:|\n")
	roles := map[string]Role{}
	for _, p := range r.Points {
		roles[p.Name] = p.Role
	}
	for _, s := range r.Samples {
		cpu, puts, p50 := r.roundRatios(s, roles[s.Point])
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", s.Round, s.Order, s.Point, num(s.CPUPerPut, 1),
			times(cpu), num(s.PutsPerSec, 0), times(puts), num(s.P50, 0), times(p50))
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(&b, "\nFailed points (not in the tables):\n\n- %s\n", strings.Join(r.Errors, "\n- "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// inRound is the sample of the point with role in s's round, if it is
// not s's own point.
func (r *Report) inRound(s Sample, role Role) (Sample, bool) {
	for _, p := range r.Points {
		if p.Role != role || p.Name == s.Point {
			continue
		}
		for _, o := range r.Samples {
			if o.Point == p.Name && o.Round == s.Round {
				return o, true
			}
		}
	}
	return Sample{}, false
}

// roundRatios are s's CPU over the floor's in the same round and, for a
// candidate, its throughput and p50 over the baseline's; 0 where there is
// no such ratio.
func (r *Report) roundRatios(s Sample, role Role) (cpu, puts, p50 float64) {
	if f, ok := r.inRound(s, Floor); ok {
		cpu = ratio(s.CPUPerPut, f.CPUPerPut)
	}
	if b, ok := r.inRound(s, Baseline); ok && role == Candidate {
		puts, p50 = ratio(s.PutsPerSec, b.PutsPerSec), ratio(s.P50, b.P50)
	}
	return cpu, puts, p50
}

// num formats v with digits decimals, "–" if there is none.
func num(v float64, digits int) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.*f", digits, v)
}

// times formats a ratio as "2.04×" (two decimals: the targets it is read
// against are 2.0× and 1.8×), "–" if there is none.
func times(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
