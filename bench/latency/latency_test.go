package latency

import (
	"math"
	"testing"
	"time"
)

// near: HDR values are within 0.1% of the recorded ones.
func near(got, want float64) bool { return math.Abs(got-want) <= 0.001*want+1e-9 }

func TestSummary(t *testing.T) {
	r := New()
	// 1..1000 µs, once each: p50 = 500 µs, p99 = 990 µs, p99.9 = 999 µs.
	for i := 1; i <= 1000; i++ {
		r.Record(time.Duration(i) * time.Microsecond)
	}
	s := r.Summary()
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"count", float64(s.Count), 1000}, {"min", s.Min, 1}, {"p50", s.P50, 500}, {"p90", s.P90, 900},
		{"p99", s.P99, 990}, {"p99.9", s.P999, 999}, {"max", s.Max, 1000}, {"mean", s.Mean, 500.5},
	} {
		if !near(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestClampAndEmpty(t *testing.T) {
	r := New()
	if s := r.Summary(); s != (Summary{}) || r.CDF() != nil {
		t.Fatalf("empty recorder: %+v", s)
	}
	r.Record(-time.Second)
	r.Record(time.Hour)
	if r.Count() != 2 {
		t.Fatalf("count %d after two out-of-range records", r.Count())
	}
	if s := r.Summary(); !near(s.Max, 100e6) || s.Min > 0.01 {
		t.Errorf("clamped min/max = %v/%v µs", s.Min, s.Max)
	}
}

func TestMergeReset(t *testing.T) {
	a, b := New(), New()
	for range 99 {
		a.Record(10 * time.Microsecond)
	}
	b.Record(5 * time.Millisecond)
	a.Merge(b)
	if s := a.Summary(); s.Count != 100 || !near(s.P50, 10) || !near(s.Max, 5000) {
		t.Errorf("merged: %+v", s)
	}
	a.Reset()
	if a.Count() != 0 {
		t.Errorf("count %d after reset", a.Count())
	}
}

func TestCDF(t *testing.T) {
	if CDFPercentiles[0] != 0 || CDFPercentiles[len(CDFPercentiles)-1] != 100 {
		t.Fatalf("percentiles run %v..%v", CDFPercentiles[0], CDFPercentiles[len(CDFPercentiles)-1])
	}
	r := New()
	for i := 1; i <= 100000; i++ {
		r.Record(time.Duration(i) * time.Nanosecond * 10)
	}
	cdf := r.CDF()
	if len(cdf) != len(CDFPercentiles) {
		t.Fatalf("%d points", len(cdf))
	}
	for i := 1; i < len(cdf); i++ {
		if cdf[i].Pct <= cdf[i-1].Pct || cdf[i].Us < cdf[i-1].Us {
			t.Fatalf("CDF not monotonic at %d: %v then %v", i, cdf[i-1], cdf[i])
		}
	}
	var p90 bool
	for _, p := range cdf {
		if p.Pct == 90 {
			p90 = near(p.Us, 900)
		}
	}
	if !p90 {
		t.Errorf("CDF has no correct 90th percentile point: %v", cdf)
	}
}

func TestRecordAllocatesNothing(t *testing.T) {
	r := New()
	d := time.Duration(1)
	if n := testing.AllocsPerRun(10000, func() { r.Record(d); d += 997 }); n != 0 {
		t.Errorf("Record allocates %v times", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	r := New()
	d := time.Duration(1)
	b.ReportAllocs()
	for b.Loop() {
		r.Record(d)
		d = (d + 7919) % (10 * time.Millisecond)
	}
}
