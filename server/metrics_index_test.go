package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestIndexMetricsCountKeysAndWrites: the key index's gauges count the
// keys written and every write kept: 20 keys, 10 of them written twice.
func TestIndexMetricsCountKeysAndWrites(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := floodServer(t, Config{Registerer: reg}, tcp.Config{})
	gauges := func() map[string]float64 {
		got := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetType() == dto.MetricType_GAUGE {
				got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return got
	}
	before := gauges()
	for i := range 30 {
		if resp := s.put(context.Background(), fmt.Appendf(nil, "k%d", i%20), []byte("v")); resp.Status != wire.StatusOK {
			t.Fatalf("put: %+v", resp)
		}
	}
	after := gauges()
	for name, want := range map[string]float64{"kvd_store_index_keys": 20, "kvd_store_index_revisions": 30} {
		if got := after[name] - before[name]; got != want {
			t.Errorf("%s grew by %v after 30 PUTs of 20 keys, want %v", name, got, want)
		}
	}
}
