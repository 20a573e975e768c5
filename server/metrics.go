package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/internal/wire"
)

// metrics are the server's own Prometheus series (the Raft node registers
// its own). One-sided GETs never reach the server, so they are counted by
// clients, not here: that is the point.
type metrics struct {
	reg        prometheus.Registerer
	cs         []prometheus.Collector
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	leaseValid prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvd_requests_total", Help: "Client RPCs served, by op and status.",
		}, []string{"op", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kvd_request_duration_seconds", Help: "Time to serve a client RPC, by op.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"op"}),
		leaseValid: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvd_region_lease_valid", Help: "1 while the region header shows a valid lease.",
		}),
	}
	table := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.cs = []prometheus.Collector{m.requests, m.latency, m.leaseValid,
		table("kvd_table_keys", "Keys in the table region.", func() float64 { return float64(s.tableStats().Keys) }),
		table("kvd_table_bytes_used", "Record bytes in use in the table region.", func() float64 { return float64(s.tableStats().BytesUsed) }),
		table("kvd_table_bytes_limbo", "Dead record bytes waiting out the reuse grace period.", func() float64 { return float64(s.tableStats().BytesLimbo) }),
		table("kvd_table_bytes_free", "Record bytes free for new records.", func() float64 { return float64(s.tableStats().BytesFree) }),
		table("kvd_region_bytes", "Size of the registered table region.", func() float64 { return float64(s.cfg.TableMem) }),
	}
	if reg != nil {
		for _, c := range m.cs {
			reg.MustRegister(c)
		}
	}
	return m
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.cs {
		m.reg.Unregister(c)
	}
}

func (m *metrics) observe(op wire.Op, st wire.Status, d time.Duration) {
	m.requests.WithLabelValues(op.String(), statusName(st)).Inc()
	m.latency.WithLabelValues(op.String()).Observe(d.Seconds())
}

func (m *metrics) leaseChanged(valid bool) {
	if valid {
		m.leaseValid.Set(1)
	} else {
		m.leaseValid.Set(0)
	}
}

func statusName(st wire.Status) string {
	switch st {
	case wire.StatusOK:
		return "ok"
	case wire.StatusNotFound:
		return "not_found"
	case wire.StatusNotLeader:
		return "not_leader"
	case wire.StatusNoSpace:
		return "no_space"
	case wire.StatusUnavailable:
		return "unavailable"
	}
	return "status_" + strconv.Itoa(int(st))
}

// tableStats reads the table's counters under the write lock.
func (s *Server) tableStats() tableStats {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if s.tbl == nil {
		return tableStats{}
	}
	st := s.tbl.Stats()
	return tableStats{Keys: st.Keys, BytesUsed: st.BytesUsed, BytesLimbo: st.BytesLimbo, BytesFree: st.BytesFree}
}

type tableStats struct {
	Keys                             int
	BytesUsed, BytesLimbo, BytesFree uint64
}
