package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/rdma"
)

// pinnedReporter is a transport that registers memory with an RDMA device
// (the rdma transport): what it holds is pinned in RAM, so the operator
// sees it beside the connection count.
type pinnedReporter interface{ Pinned() rdma.Pinned }

// rdmaCollectors are the gauges of an RDMA transport's registered memory;
// none for another transport.
func rdmaCollectors(tr transport.Transport) []prometheus.Collector {
	p, ok := tr.(pinnedReporter)
	if !ok {
		return nil
	}
	pinned := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvd_rdma_pinned_bytes",
		Help: "Memory registered with the RDMA device (pinned), by kind: connections (buffers and READ staging), staging (the READ staging part) and regions (the table).",
	}, []string{"kind"})
	return []prometheus.Collector{
		gaugeFuncs{pinned: pinned, read: p.Pinned},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kvd_rdma_connections", Help: "RDMA connections that hold registered memory (clients' and peers').",
		}, func() float64 { return float64(p.Pinned().Conns) }),
	}
}

// gaugeFuncs sets the pinned gauges from one reading at each collection.
type gaugeFuncs struct {
	pinned *prometheus.GaugeVec
	read   func() rdma.Pinned
}

func (g gaugeFuncs) Describe(ch chan<- *prometheus.Desc) { g.pinned.Describe(ch) }

func (g gaugeFuncs) Collect(ch chan<- prometheus.Metric) {
	p := g.read()
	g.pinned.WithLabelValues("connections").Set(float64(p.ConnBytes))
	g.pinned.WithLabelValues("staging").Set(float64(p.StagingBytes))
	g.pinned.WithLabelValues("regions").Set(float64(p.RegionBytes))
	g.pinned.Collect(ch)
}
