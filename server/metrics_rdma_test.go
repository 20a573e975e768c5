package server

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/rdma"
)

type pinnedTransport struct {
	transport.Transport
	p rdma.Pinned
}

func (t pinnedTransport) Pinned() rdma.Pinned { return t.p }

// TestRDMAPinnedMetrics: an RDMA transport's registered memory shows in
// /metrics; another transport adds no such series.
func TestRDMAPinnedMetrics(t *testing.T) {
	if cs := rdmaCollectors(pinnedTransport{}.Transport); cs != nil {
		t.Fatalf("a transport without Pinned got %d RDMA collectors", len(cs))
	}
	reg := prometheus.NewRegistry()
	tr := pinnedTransport{p: rdma.Pinned{Conns: 3, ConnBytes: 3 * 987136, StagingBytes: 0, RegionBytes: 64 << 20}}
	reg.MustRegister(rdmaCollectors(tr)...)
	want := `
# HELP kvd_rdma_connections RDMA connections that hold registered memory (clients' and peers').
# TYPE kvd_rdma_connections gauge
kvd_rdma_connections 3
# HELP kvd_rdma_pinned_bytes Memory registered with the RDMA device (pinned), by kind: connections (buffers and READ staging), staging (the READ staging part) and regions (the table).
# TYPE kvd_rdma_pinned_bytes gauge
kvd_rdma_pinned_bytes{kind="connections"} 2.961408e+06
kvd_rdma_pinned_bytes{kind="regions"} 6.7108864e+07
kvd_rdma_pinned_bytes{kind="staging"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
