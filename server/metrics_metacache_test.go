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

// TestMetaCacheMetricsCountAbsentKeys: a node whose state fits its key
// metadata cache shows it complete, and counts each PUT of a new key as a
// lookup answered absent without a Pebble read.
func TestMetaCacheMetricsCountAbsentKeys(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := floodServer(t, Config{Registerer: reg}, tcp.Config{})
	for i := range 20 {
		if resp := s.put(context.Background(), fmt.Appendf(nil, "new%d", i), []byte("v")); resp.Status != wire.StatusOK {
			t.Fatalf("put: %+v", resp)
		}
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch m := mf.GetMetric()[0]; mf.GetType() {
		case dto.MetricType_COUNTER:
			got[mf.GetName()] = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	if v := got["kvd_store_meta_cache_complete"]; v != 1 {
		t.Errorf("kvd_store_meta_cache_complete = %v, want 1", v)
	}
	if v := got["kvd_store_meta_cache_absent_hits_total"]; v < 20 {
		t.Errorf("kvd_store_meta_cache_absent_hits_total = %v after 20 PUTs of new keys, want at least 20", v)
	}
}
