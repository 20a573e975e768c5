package plot

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/kvd-project/kvd/bench/result"
)

// ErrNoData: the report has nothing a chart could show.
var ErrNoData = errors.New("plot: no data for this chart")

// Chart is one written chart.
type Chart struct {
	Title string
	Files []string // one per format
}

// Charts lists the charts All draws, by file stem.
var Charts = []struct {
	Stem  string
	Title string
	Draw  func(*result.Report) (*plot.Plot, error)
}{
	{"latency-cdf", "Latency distribution", LatencyCDF},
	{"throughput-clients", "Throughput vs clients", ThroughputVsClients},
	{"latency-value-size", "Latency vs value size", LatencyVsValueSize},
}

// All draws every chart the report has data for into dir, once per format
// ("png", "svg"), and returns what it wrote. Charts without data are
// skipped.
func All(rep *result.Report, dir string, formats ...string) ([]Chart, error) {
	if len(formats) == 0 {
		formats = []string{"png"}
	}
	var out []Chart
	for _, c := range Charts {
		p, err := c.Draw(rep)
		if errors.Is(err, ErrNoData) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", c.Stem, err)
		}
		ch := Chart{Title: c.Title}
		for _, f := range formats {
			path := filepath.Join(dir, c.Stem+"."+f)
			if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
				return out, fmt.Errorf("%s: %w", path, err)
			}
			ch.Files = append(ch.Files, path)
		}
		out = append(out, ch)
	}
	return out, nil
}

// line is one labelled series of points.
type line struct {
	label  string
	xys    plotter.XYs
	dashed bool
}

// draw adds lines to p with distinct colours and glyphs.
func draw(p *plot.Plot, lines []line) error {
	if len(lines) == 0 {
		return ErrNoData
	}
	for i, l := range lines {
		slices.SortFunc(l.xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		ln, pts, err := plotter.NewLinePoints(l.xys)
		if err != nil {
			return err
		}
		ln.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		if l.dashed {
			ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(ln, pts)
		p.Legend.Add(l.label, ln, pts)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	headroom(p, len(lines))
	return nil
}

// headroom raises the top of the Y axis so the legend (top left, one row
// per line) sits above the data instead of over it.
func headroom(p *plot.Plot, rows int) {
	frac := 0.045 * float64(rows+1)
	if _, isLog := p.Y.Scale.(plot.LogScale); isLog && p.Y.Min > 0 {
		span := math.Log10(p.Y.Max) - math.Log10(p.Y.Min)
		p.Y.Max = math.Pow(10, math.Log10(p.Y.Max)+max(span, 0.5)*frac/(1-frac))
		return
	}
	p.Y.Max += (p.Y.Max - p.Y.Min) * frac / (1 - frac)
}

// plainTicks are gonum's default ticks with labels in plain digits
// ("125000", not "125000.00").
var plainTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
})

// logTicks labels 1, 2 and 5 times each power of ten in plain digits.
var logTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1; m < 10; m++ {
			v := float64(m) * math.Pow(10, e)
			if v < lo*0.999 || v > hi*1.001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
})

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

// nines maps a percentile onto the "number of nines" axis: 90 → 1,
// 99 → 2, 99.9 → 3.
func nines(pct float64) float64 { return -math.Log10(1 - pct/100) }

var ninesTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for k := 0; float64(k) <= hi+1e-9; k++ {
		label := "0%"
		if k > 0 {
			label = strconv.FormatFloat(100*(1-math.Pow10(-k)), 'f', max(0, k-2), 64) + "%"
		}
		ts = append(ts, plot.Tick{Value: float64(k), Label: label})
	}
	return ts
})

// LatencyCDF plots, per series, the latency distribution of its GET-only
// and PUT-only runs at the lowest concurrency and the most common value
// size: latency (log) against percentile on a "nines" scale, so the tail
// is as wide as the body.
func LatencyCDF(rep *result.Report) (*plot.Plot, error) {
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
	if err := draw(p, lines); err != nil {
		return p, err
	}
	p.X.Max += 0.4 // room for the last tick's label
	return p, nil
}

// ThroughputVsClients plots ops/s against closed-loop clients, one line
// per series, mix and consistency at the most common value size.
func ThroughputVsClients(rep *result.Report) (*plot.Plot, error) {
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
	return p, draw(p, lines)
}

var powersOfTwo = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for v := 1.0; v <= hi*1.0001; v *= 2 {
		if v >= lo*0.9999 {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
	}
	return ts
})

// LatencyVsValueSize plots median latency against value size for the
// GET-only and PUT-only runs at each series' lowest concurrency, with the
// raw baselines dashed.
func LatencyVsValueSize(rep *result.Report) (*plot.Plot, error) {
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
	return p, draw(p, lines)
}

var powersOfFour = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for v := 1.0; v <= hi*1.0001; v *= 4 {
		if v >= lo*0.9999 {
			ts = append(ts, plot.Tick{Value: v, Label: sizeLabel(int(v))})
		}
	}
	return ts
})

func sizeLabel(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.Itoa(n>>20) + "Mi"
	case n >= 1<<10:
		return strconv.Itoa(n>>10) + "Ki"
	}
	return strconv.Itoa(n)
}
