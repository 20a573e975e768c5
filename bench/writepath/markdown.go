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
	b.WriteString("\n### Rounds\n\n| round | # | point | server CPU µs/PUT | × this round's floor | PUTs/s | one-client PUT p50 µs |\n")
	b.WriteString("|--:|--:|---|--:|--:|--:|--:|\n")
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %s | %s |\n", s.Round, s.Order, s.Point, num(s.CPUPerPut, 1),
			times(r.roundRatio(s)), num(s.PutsPerSec, 0), num(s.P50, 0))
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(&b, "\nFailed points (not in the tables):\n\n- %s\n", strings.Join(r.Errors, "\n- "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// roundRatio is s's CPU over the floor's in the same round; 0 for the
// floor itself or without one.
func (r *Report) roundRatio(s Sample) float64 {
	floor := ""
	for _, p := range r.Points {
		if p.Role == Floor {
			floor = p.Name
		}
	}
	if s.Point == floor {
		return 0
	}
	for _, f := range r.Samples {
		if f.Point == floor && f.Round == s.Round {
			return ratio(s.CPUPerPut, f.CPUPerPut)
		}
	}
	return 0
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
