package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	kvstore "github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestWALMetricsShowTheLogsWrites: a node with its Raft log in the WAL
// shows the log's syncs, their latency, the bytes and entries written and
// the files it holds, all non-zero after some PUTs; a node with its log in
// Pebble shows no kvd_wal_* series at all.
func TestWALMetricsShowTheLogsWrites(t *testing.T) {
	for _, mode := range []string{kvstore.RaftLogWAL, kvstore.RaftLogPebble} {
		t.Run(mode, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			s := floodServer(t, Config{RaftLog: mode, Registerer: reg}, tcp.Config{})
			for i := range 20 {
				if resp := s.put(context.Background(), fmt.Appendf(nil, "k%d", i), []byte("v")); resp.Status != wire.StatusOK {
					t.Fatalf("put: %+v", resp)
				}
			}
			got := walSeries(t, reg)
			if mode == kvstore.RaftLogPebble {
				if len(got) > 0 {
					t.Fatalf("a node in the pebble mode shows %v", got)
				}
				return
			}
			// Each PUT waits for its own commit: at least one sync and
			// one entry each.
			atLeast := map[string]float64{"kvd_wal_syncs_total": 20, "kvd_wal_sync_duration_seconds": 20,
				"kvd_wal_bytes_written_total": 20, "kvd_wal_entries_total": 20, "kvd_wal_last_index": 20,
				"kvd_wal_segments": 1, "kvd_wal_disk_bytes": 1, "kvd_wal_first_index": 1}
			for name, min := range atLeast {
				if got[name] < min {
					t.Errorf("%s = %v after 20 PUTs, want at least %v", name, got[name], min)
				}
			}
			for _, name := range []string{"kvd_wal_segment_rolls_total", "kvd_wal_compactions_total", "kvd_wal_resets_total", "kvd_wal_spare_segments"} {
				if _, ok := got[name]; !ok {
					t.Errorf("%s missing", name)
				}
			}
		})
	}
}

// walSeries gathers the kvd_wal_* series: a counter's or gauge's value, a
// histogram's count.
func walSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "kvd_wal_") {
			continue
		}
		m := mf.GetMetric()[0]
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			out[mf.GetName()] = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			out[mf.GetName()] = m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			out[mf.GetName()] = float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}
