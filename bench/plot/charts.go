package plot

import (
	"cmp"
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/kvd-project/kvd/bench/result"
)

// mostCommon returns the value most runs have (the smallest on a tie).
func mostCommon(runs []*result.Run, f func(*result.Run) int) int {
	n := map[int]int{}
	best, bestN := 0, 0
	for _, r := range runs {
		v := f(r)
		n[v]++
		if n[v] > bestN || (n[v] == bestN && v < best) {
			best, bestN = v, n[v]
		}
	}
	return best
}

func runsWhere(rep *result.Report, keep func(*result.Run) bool) []*result.Run {
	var out []*result.Run
	for i := range rep.Runs {
		if keep(&rep.Runs[i]) {
			out = append(out, &rep.Runs[i])
		}
	}
	return out
}

// opName names a run's workload in legends: "GET linearizable", "PUT",
// "95/5 readindex", with the key distribution when it is not uniform.
func opName(r *result.Run) string {
	var s string
	switch r.ReadPct {
	case 100:
		s = "GET " + r.Consistency
	case 0:
		s = "PUT"
	default:
		s = r.Mix + " " + r.Consistency
	}
	if r.Dist != "" && r.Dist != "uniform" {
		s += " " + r.Dist
	}
	return s
}

// addPoint appends (x, y) to l unless l already has a point at x (a report
// may hold the same point from two sweeps; the first wins).
func addPoint(l *line, x, y float64) {
	if !slices.ContainsFunc(l.xys, func(p plotter.XY) bool { return p.X == x }) {
		l.xys = append(l.xys, plotter.XY{X: x, Y: y})
	}
}

// LatencyCDF plots, per series, the latency distribution of its GET-only
// and PUT-only runs at the lowest concurrency and the most common value
// size: latency (log) against percentile on a "nines" scale, so the tail
// is as wide as the body.
func LatencyCDF(rep *result.Report) (*Figure, error) {
	var lines []line
	for _, s := range rep.Series() {
		runs := runsWhere(rep, func(r *result.Run) bool {
			return r.Series == s && (r.ReadPct == 100 || r.ReadPct == 0) && len(r.CDF) > 0 && r.Mode == "closed"
		})
		if len(runs) == 0 {
			continue
		}
		vs := mostCommon(runs, func(r *result.Run) int { return r.ValueSize })
		minC := slices.MinFunc(runs, func(a, b *result.Run) int { return cmp.Compare(a.Clients, b.Clients) }).Clients
		seen := map[string]bool{}
		for _, r := range runs {
			name := opName(r)
			if r.ValueSize != vs || r.Clients != minC || seen[name] {
				continue
			}
			seen[name] = true
			var xys plotter.XYs
			for _, pt := range r.CDF {
				if pt.Pct < 100 && pt.Us > 0 {
					xys = append(xys, plotter.XY{X: nines(pt.Pct), Y: pt.Us})
				}
			}
			lines = append(lines, line{label: fmt.Sprintf("%s %s (%d B, %d clients)", s, name, vs, minC), xys: xys})
		}
	}
	p := plot.New()
	p.Title.Text = "Latency distribution"
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs)"
	p.X.Tick.Marker = ninesTicks
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks
	fig, err := draw(p, lines)
	if err != nil {
		return nil, err
	}
	p.X.Max += 0.4 // room for the last tick's label
	return fig, nil
}

// ThroughputVsClients plots ops/s against closed-loop clients, one line
// per series, mix and consistency at the most common value size.
func ThroughputVsClients(rep *result.Report) (*Figure, error) {
	runs := runsWhere(rep, func(r *result.Run) bool { return r.Mode == "closed" && r.Throughput > 0 })
	vs := mostCommon(runs, func(r *result.Run) int { return r.ValueSize })
	byLine := map[string]*line{}
	var order []string
	for _, r := range runs {
		if r.ValueSize != vs {
			continue
		}
		label := fmt.Sprintf("%s %s", r.Series, opName(r))
		if byLine[label] == nil {
			byLine[label] = &line{label: label}
			order = append(order, label)
		}
		addPoint(byLine[label], float64(r.Clients), r.Throughput)
	}
	var lines []line
	for _, l := range order {
		if len(byLine[l].xys) > 1 {
			lines = append(lines, *byLine[l])
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput vs clients (%d B values)", vs)
	p.X.Label.Text = "clients (closed loop)"
	p.Y.Label.Text = "ops/s"
	p.Y.Tick.Marker = plainTicks
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, powersOfTwo
	return draw(p, lines)
}

// LatencyVsValueSize plots median latency against value size for the
// GET-only and PUT-only runs at each series' lowest concurrency, with the
// raw baselines dashed.
func LatencyVsValueSize(rep *result.Report) (*Figure, error) {
	byLine := map[string]*line{}
	var order []string
	add := func(label string, dashed bool, x int, y float64) {
		if y <= 0 {
			return
		}
		l := byLine[label]
		if l == nil {
			l = &line{label: label, dashed: dashed}
			byLine[label] = l
			order = append(order, label)
		}
		addPoint(l, float64(max(x, 1)), y)
	}
	for _, s := range rep.Series() {
		runs := runsWhere(rep, func(r *result.Run) bool {
			return r.Series == s && (r.ReadPct == 100 || r.ReadPct == 0) && r.Mode == "closed"
		})
		if len(runs) == 0 {
			continue
		}
		minC := slices.MinFunc(runs, func(a, b *result.Run) int { return cmp.Compare(a.Clients, b.Clients) }).Clients
		for _, r := range runs {
			if r.Clients == minC {
				add(fmt.Sprintf("%s %s p50", s, opName(r)), false, r.ValueSize, r.Lat.P50)
			}
		}
	}
	for _, b := range rep.Baselines {
		add(fmt.Sprintf("%s %s p50 (raw)", b.Series, b.Kind), true, b.Bytes, b.Lat.P50)
	}
	var lines []line
	for _, l := range order {
		if len(byLine[l].xys) > 1 {
			lines = append(lines, *byLine[l])
		}
	}
	p := plot.New()
	p.Title.Text = "Latency vs value size"
	p.X.Label.Text = "value size (bytes)"
	p.Y.Label.Text = "p50 latency (µs)"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, powersOfFour
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks
	return draw(p, lines)
}
