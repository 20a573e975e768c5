package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvd-project/kvd/internal/wire"
)

// TestObserveCountsEveryOpAndStatus: requests are counted under their own
// op and status, and timed under their op, whether their series were
// looked up before (the cached path) or not.
func TestObserveCountsEveryOpAndStatus(t *testing.T) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "r"}, []string{"op", "status"}),
		latency:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "l"}, []string{"op"}),
	}
	reqs := []struct {
		op wire.Op
		st wire.Status
	}{
		{wire.OpPut, wire.StatusOK}, {wire.OpPut, wire.StatusOK}, {wire.OpPut, wire.StatusNotLeader},
		{wire.OpGet, wire.StatusNotFound}, {wire.OpGet, wire.StatusOK}, {wire.OpPut, wire.StatusOK},
	}
	for _, r := range reqs {
		m.observe(r.op, r.st, time.Millisecond)
	}
	for _, c := range []struct {
		op     wire.Op
		status string
		want   float64
	}{
		{wire.OpPut, "ok", 3}, {wire.OpPut, "not_leader", 1}, {wire.OpGet, "not_found", 1}, {wire.OpGet, "ok", 1},
		{wire.OpDelete, "ok", 0},
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(c.op.String(), c.status)); got != c.want {
			t.Errorf("%s %s: counted %v, want %v", c.op, c.status, got, c.want)
		}
	}
	for op, want := range map[wire.Op]uint64{wire.OpPut: 4, wire.OpGet: 2} {
		h := m.latency.WithLabelValues(op.String()).(prometheus.Histogram)
		if got := histogramCount(t, h); got != want {
			t.Errorf("%s: %d timed, want %d", op, got, want)
		}
	}
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	h.Collect(ch)
	var d dto.Metric
	if err := (<-ch).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount()
}
