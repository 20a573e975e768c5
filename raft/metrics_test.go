package raft

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Metric{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetMetric()[0]
	}
	return out
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := testConfig()
	cfg.Registerer = reg
	c := newCluster(t, 1, cfg)
	tn := c.leader()
	c.put("k", "v")
	wait.For(t, "lease", func() bool { return tn.node.Status().LeaseValid })
	st := tn.node.Status()
	wait.For(t, "lease gauge", func() bool { return gather(t, reg)["kvd_raft_lease_valid"].GetGauge().GetValue() == 1 })
	m := gather(t, reg)
	gauges := map[string]float64{
		"kvd_raft_is_leader":     1,
		"kvd_raft_leader_id":     1,
		"kvd_raft_term":          float64(st.Term),
		"kvd_raft_applied_index": float64(st.Applied),
		"kvd_raft_commit_index":  float64(st.Commit),
	}
	for name, want := range gauges {
		if got := m[name].GetGauge().GetValue(); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := m["kvd_raft_proposals_committed_total"].GetCounter().GetValue(); got != 1 {
		t.Errorf("proposals committed = %v, want 1", got)
	}
	if got := m["kvd_raft_leader_changes_total"].GetCounter().GetValue(); got < 1 {
		t.Errorf("leader changes = %v", got)
	}
	if got := m["kvd_raft_sync_duration_seconds"].GetHistogram().GetSampleCount(); got == 0 {
		t.Error("no fsync observed")
	}
	if _, ok := m["kvd_raft_proposals_failed_total"]; !ok {
		t.Error("kvd_raft_proposals_failed_total not registered")
	}
	// Close unregisters, so the node can be reopened on the same registry.
	c.stop(1)
	if n := len(gather(t, reg)); n != 0 {
		t.Errorf("%d metric families left after Close", n)
	}
	c.start(1, false)
	c.leader()
}
