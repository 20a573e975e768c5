package plot

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"

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
	Draw  func(*result.Report) (*Figure, error)
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
		fig, err := c.Draw(rep)
		if errors.Is(err, ErrNoData) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", c.Stem, err)
		}
		ch := Chart{Title: c.Title}
		for _, f := range formats {
			path := filepath.Join(dir, c.Stem+"."+f)
			if err := fig.Plot.Save(width, fig.Height, path); err != nil {
				return out, fmt.Errorf("%s: %w", path, err)
			}
			ch.Files = append(ch.Files, path)
		}
		out = append(out, ch)
	}
	return out, nil
}

// Figure is a drawn chart and the height it needs: the legend sits inside
// the plot, one row per line, so many lines need a taller canvas.
type Figure struct {
	Plot   *plot.Plot
	Height vg.Length
}

// Canvas geometry: the width is fixed; the height grows with the legend so
// that the data keep at least minDataHeight below it.
const (
	width         = 8 * vg.Inch
	minHeight     = 5 * vg.Inch
	legendRow     = vg.Length(15) // points per legend row at the default font
	margins       = 1.1 * vg.Inch // title, axis labels and ticks
	minDataHeight = 3 * vg.Inch
)

func heightFor(rows int) vg.Length {
	return max(minHeight, margins+minDataHeight+vg.Length(rows+1)*legendRow)
}

// line is one labelled series of points.
type line struct {
	label  string
	xys    plotter.XYs
	dashed bool
}

// draw adds lines to p with distinct colours and glyphs, and sizes the
// figure for its legend.
func draw(p *plot.Plot, lines []line) (*Figure, error) {
	if len(lines) == 0 {
		return nil, ErrNoData
	}
	for i, l := range lines {
		slices.SortFunc(l.xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		ln, pts, err := plotter.NewLinePoints(l.xys)
		if err != nil {
			return nil, err
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
	h := heightFor(len(lines))
	headroom(p, float64(vg.Length(len(lines)+1)*legendRow/(h-margins)))
	return &Figure{Plot: p, Height: h}, nil
}

// headroom raises the top of the Y axis so that the top frac of the plot
// area, where the legend is, holds no data.
func headroom(p *plot.Plot, frac float64) {
	if _, isLog := p.Y.Scale.(plot.LogScale); isLog && p.Y.Min > 0 {
		span := math.Log10(p.Y.Max) - math.Log10(p.Y.Min)
		p.Y.Max = math.Pow(10, math.Log10(p.Y.Max)+max(span, 0.5)*frac/(1-frac))
		return
	}
	p.Y.Max += (p.Y.Max - p.Y.Min) * frac / (1 - frac)
}
