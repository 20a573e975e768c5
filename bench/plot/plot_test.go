package plot

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/bench/latency"
	"github.com/kvd-project/kvd/bench/result"
)

func run(series, cons string, readPct, clients, value int, p50, ops float64) result.Run {
	cdf := make([]latency.Point, len(latency.CDFPercentiles))
	for i, p := range latency.CDFPercentiles {
		cdf[i] = latency.Point{Pct: p, Us: p50 * (1 + float64(i)/5)}
	}
	return result.Run{Series: series, Transport: series, ReadPct: readPct, Consistency: cons, Mode: "closed",
		Clients: clients, ValueSize: value, Throughput: ops, Lat: latency.Summary{P50: p50}, CDF: cdf}
}

func sample() *result.Report {
	rep := &result.Report{Schema: 1}
	for _, s := range []struct {
		name  string
		scale float64
	}{{"tcp", 1}, {"rdma", 0.2}} {
		for _, c := range []int{1, 4, 16} {
			rep.Runs = append(rep.Runs,
				run(s.name, "linearizable", 100, c, 256, 50*s.scale, 1e4*float64(c)/s.scale),
				run(s.name, "readindex", 100, c, 256, 80*s.scale, 5e3*float64(c)/s.scale),
				run(s.name, "linearizable", 0, c, 256, 900*s.scale, 1e3*float64(c)))
		}
		for _, v := range []int{16, 4096, 65536} {
			rep.Runs = append(rep.Runs, run(s.name, "linearizable", 100, 1, v, 40*s.scale+float64(v)/1000, 1e4))
		}
	}
	for _, v := range []int{16, 256, 4096, 65536} {
		rep.Baselines = append(rep.Baselines, result.Baseline{Series: "tcp", Transport: "tcp", Kind: result.KindTCPRead, Bytes: v,
			Lat: latency.Summary{P50: 20 + float64(v)/2000}})
	}
	return rep
}

func TestAll(t *testing.T) {
	dir := t.TempDir()
	charts, err := All(sample(), dir, "png", "svg")
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) != len(Charts) {
		t.Fatalf("%d charts, want %d", len(charts), len(Charts))
	}
	for _, c := range charts {
		if len(c.Files) != 2 {
			t.Fatalf("%s: files %v", c.Title, c.Files)
		}
		png, err := os.ReadFile(c.Files[0])
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", c.Files[0], err)
		}
		svg, err := os.ReadFile(c.Files[1])
		if err != nil || !bytes.Contains(svg, []byte("<svg")) {
			t.Errorf("%s: not an SVG (%v)", c.Files[1], err)
		}
		// Both transports are on the same axes.
		if !bytes.Contains(svg, []byte("rdma")) || !bytes.Contains(svg, []byte("tcp")) {
			t.Errorf("%s lacks a series", c.Files[1])
		}
	}
}

func TestNoData(t *testing.T) {
	rep := &result.Report{Schema: 1}
	for _, c := range Charts {
		if _, err := c.Draw(rep); !errors.Is(err, ErrNoData) {
			t.Errorf("%s of an empty report: %v", c.Stem, err)
		}
	}
	charts, err := All(rep, t.TempDir())
	if err != nil || len(charts) != 0 {
		t.Errorf("All of an empty report: %v, %v", charts, err)
	}
}

func TestNines(t *testing.T) {
	for _, tc := range []struct{ pct, want float64 }{{0, 0}, {90, 1}, {99, 2}, {99.9, 3}} {
		if got := nines(tc.pct); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("nines(%v) = %v", tc.pct, got)
		}
	}
	var labels []string
	for _, tk := range ninesTicks.Ticks(0, 3) {
		labels = append(labels, tk.Label)
	}
	if got := strings.Join(labels, " "); got != "0% 90% 99% 99.9%" {
		t.Errorf("ticks %q", got)
	}
}
