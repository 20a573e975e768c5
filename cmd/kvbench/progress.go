package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kvd-project/kvd/bench"
	"github.com/kvd-project/kvd/bench/result"
)

// printer writes progress to stderr: a line per finished point, and on a
// terminal a live line that rewrites itself while a point runs.
type printer struct {
	w     io.Writer
	quiet bool
	tty   bool
	i, n  int
	live  bool // a live line is showing
}

func newPrinter(w io.Writer, quiet bool) *printer {
	p := &printer{w: w, quiet: quiet}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *printer) clear() {
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
		p.live = false
	}
}

func (p *printer) say(format string, args ...any) {
	if p.quiet {
		return
	}
	p.clear()
	fmt.Fprintf(p.w, "kvbench: "+format+"\n", args...)
}

// warn prints whatever quiet says: something the results will lack.
func (p *printer) warn(format string, args ...any) {
	p.clear()
	fmt.Fprintf(p.w, "kvbench: "+format+"\n", args...)
}

func (p *printer) start(i, n int, pt *bench.Point) {
	p.i, p.n = i, n
	if p.tty && !p.quiet {
		p.clear()
		fmt.Fprintf(p.w, "[%d/%d] %v: preloading…", i, n, pt)
		p.live = true
	}
}

// progress is the runner's hook: called about once a second mid-point.
func (p *printer) progress(pr bench.Progress) {
	if !p.tty || p.quiet {
		return
	}
	p.clear()
	phase := fmt.Sprintf("%.1fs/%.1fs", pr.Elapsed.Seconds(), pr.Point.Duration.Seconds())
	if pr.Elapsed < 0 {
		phase = "warmup"
	}
	fmt.Fprintf(p.w, "[%d/%d] %v: %s  %s ops/s  %d ops  %d errors", p.i, p.n, pr.Point, phase, si(pr.Rate), pr.Ops, pr.Errors)
	p.live = true
}

func (p *printer) done(r *result.Run) {
	if p.quiet {
		return
	}
	p.clear()
	var b strings.Builder
	fmt.Fprintf(&b, "[%d/%d] %s %s c=%d v=%dB %s: %s ops/s, p50 %.1fµs p99 %.1fµs max %.0fµs, errors %d",
		p.i, p.n, r.Mix, r.Consistency, r.Clients, r.ValueSize, r.Dist, si(r.Throughput), r.Lat.P50, r.Lat.P99, r.Lat.Max, r.Errors)
	if r.Gets > 0 {
		fmt.Fprintf(&b, ", %.2f rt/GET, %.2f READs/GET, %.0f B/GET, %d retries", r.RoundsPerGet(), r.ReadsPerOneSidedGet(),
			r.BytesPerOneSidedGet(), r.Retries)
	}
	if r.ServerPIDs > 0 {
		fmt.Fprintf(&b, ", server %.1fµs CPU/op (net %.1f)", r.ServerCPUPerOp, r.ServerCPUNetPerOp)
	}
	fmt.Fprintln(p.w, b.String())
}

// si formats a rate as 950, 12.3k, 1.25M.
func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
