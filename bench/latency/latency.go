package latency

import (
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Range and precision of every Recorder: 1 ns to 100 s at 3 significant
// digits (a recorded value is within 0.1% of the true one). Slower
// operations are recorded as 100 s, so a stall still shows in the maximum.
const (
	lowest  = 1
	highest = int64(100 * time.Second)
	digits  = 3
)

// Recorder is a latency histogram. Not safe for concurrent use.
type Recorder struct {
	h *hdrhistogram.Histogram
}

// New returns an empty Recorder (about 200 KiB).
func New() *Recorder {
	return &Recorder{h: hdrhistogram.New(lowest, highest, digits)}
}

// Record adds one latency. Out-of-range values are clamped, never dropped,
// so Count always equals the number of calls.
func (r *Recorder) Record(d time.Duration) {
	v := min(max(int64(d), lowest), highest)
	_ = r.h.RecordValue(v) // cannot fail: v is in range
}

// Merge adds every value of o to r.
func (r *Recorder) Merge(o *Recorder) { r.h.Merge(o.h) }

// Reset empties r.
func (r *Recorder) Reset() { r.h.Reset() }

// Count is the number of latencies recorded.
func (r *Recorder) Count() int64 { return r.h.TotalCount() }

// Summary is a histogram's headline numbers, in microseconds.
type Summary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_us"`
	Min   float64 `json:"min_us"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
}

// Point is one point of a latency distribution: Pct percent of operations
// took at most Us microseconds.
type Point struct {
	Pct float64 `json:"pct"`
	Us  float64 `json:"us"`
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

// Summary computes r's headline numbers (all zero if r is empty).
func (r *Recorder) Summary() Summary {
	if r.h.TotalCount() == 0 {
		return Summary{}
	}
	return Summary{
		Count: r.h.TotalCount(),
		Mean:  r.h.Mean() / 1e3,
		Min:   us(r.h.Min()),
		P50:   us(r.h.ValueAtQuantile(50)),
		P90:   us(r.h.ValueAtQuantile(90)),
		P99:   us(r.h.ValueAtQuantile(99)),
		P999:  us(r.h.ValueAtQuantile(99.9)),
		Max:   us(r.h.Max()),
	}
}

// CDFPercentiles are the percentiles CDF reports: evenly spaced in "nines"
// (0, 36.9, 60.2, ... 90, ... 99, ... 99.999) so the tail gets as many points
// as the body, then 100.
var CDFPercentiles = func() []float64 {
	var ps []float64
	for k := 0; k <= 25; k++ {
		ps = append(ps, math.Round(1e6*100*(1-math.Pow(10, -float64(k)/5)))/1e6)
	}
	return append(ps, 100)
}()

// CDF is r's distribution at CDFPercentiles (nil if r is empty).
func (r *Recorder) CDF() []Point {
	if r.h.TotalCount() == 0 {
		return nil
	}
	out := make([]Point, len(CDFPercentiles))
	for i, p := range CDFPercentiles {
		out[i] = Point{Pct: p, Us: us(r.h.ValueAtQuantile(p))}
	}
	return out
}
