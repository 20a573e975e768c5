package result

import "math"

// Ratio compares one operation type of a run with the baseline of the same
// shape on the same transport: how many raw round trips of the same size
// kvd's latency is worth.
type Ratio struct {
	Op        string  `json:"op"`   // "get" or "put"
	Kind      string  `json:"kind"` // the baseline's Kind
	BaseBytes int     `json:"base_bytes"`
	BaseP50   float64 `json:"base_p50_us"`
	BaseP99   float64 `json:"base_p99_us"`
	P50       float64 `json:"p50_ratio"` // run p50 / baseline p50
	P99       float64 `json:"p99_ratio"` // 0 when the baseline has no p99
}

// baselineKind is the raw operation a kvd GET or PUT is compared with: a
// one-sided GET with an RDMA READ, everything two-sided with a message
// round trip (on TCP, everything is a message round trip).
func baselineKind(transport, op, consistency string) string {
	switch {
	case transport == "rdma" && op == "get" && consistency != "readindex":
		return KindRDMARead
	case transport == "rdma":
		return KindRDMASend
	case op == "get":
		return KindTCPRead
	}
	return KindTCPWrite
}

// FindBaseline picks the baseline for op ("get" or "put") of run: the right
// kind on the run's transport, from the series closest to the run's (its
// own, else the one whose name shares the longest prefix with it, so that
// vm-tcp-64inst is compared with vm-tcp, measured in the same VM, not with
// the host's tcp); among those, the size closest to the run's value size
// (on a log scale; ties go to the larger).
func FindBaseline(run *Run, op string, bases []Baseline) (Baseline, bool) {
	kind := baselineKind(run.Transport, op, run.Consistency)
	var best Baseline
	found, bestNear, bestDist := false, -1, math.Inf(1)
	want := math.Log2(float64(max(run.ValueSize, 1)))
	for _, b := range bases {
		if b.Kind != kind || b.Transport != run.Transport {
			continue
		}
		near := seriesNearness(run.Series, b.Series)
		d := math.Abs(math.Log2(float64(max(b.Bytes, 1))) - want)
		better := !found || near > bestNear ||
			(near == bestNear && (d < bestDist || (d == bestDist && b.Bytes > best.Bytes)))
		if better {
			best, found, bestNear, bestDist = b, true, near, d
		}
	}
	return best, found
}

// seriesNearness ranks how close series b is to series a: past any shared
// prefix, the same series.
func seriesNearness(a, b string) int {
	if a == b {
		return len(a) + 1
	}
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// Ratios compares each operation type the run issued with its baseline.
// An operation type without a baseline is left out.
func Ratios(run *Run, bases []Baseline) []Ratio {
	var out []Ratio
	for _, op := range []struct {
		name string
		n    uint64
		p50  float64
		p99  float64
	}{{"get", run.Gets, run.GetLat.P50, run.GetLat.P99}, {"put", run.Puts, run.PutLat.P50, run.PutLat.P99}} {
		if op.n == 0 {
			continue
		}
		b, ok := FindBaseline(run, op.name, bases)
		if !ok {
			continue
		}
		out = append(out, Ratio{
			Op: op.name, Kind: b.Kind, BaseBytes: b.Bytes, BaseP50: b.Lat.P50, BaseP99: b.Lat.P99,
			P50: ratio(op.p50, b.Lat.P50), P99: ratio(op.p99, b.Lat.P99),
		})
	}
	return out
}

// ComputeRatios (re)fills every run's Ratios from the report's baselines.
func (rep *Report) ComputeRatios() {
	for i := range rep.Runs {
		rep.Runs[i].Ratios = Ratios(&rep.Runs[i], rep.Baselines)
	}
}

// RatioFor returns the run's ratio for op, if it has one.
func (r *Run) RatioFor(op string) (Ratio, bool) {
	for _, x := range r.Ratios {
		if x.Op == op {
			return x, true
		}
	}
	return Ratio{}, false
}
