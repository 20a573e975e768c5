package raft

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
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
	wait.For(t, "lease gauge", func() bool { return gather(t, reg)["kvd_raft_lease_valid"].GetGauge().GetValue() == 1 })
	// The leader may still append entries of its own (the cluster ID,
	// a lease marker), so the gauges are compared with a status taken
	// once the applied index has stopped moving between the two reads.
	var st Status
	var m map[string]*dto.Metric
	wait.For(t, "settled applied index", func() bool {
		st = tn.node.Status()
		m = gather(t, reg)
		return tn.node.Status().Applied == st.Applied &&
			m["kvd_raft_applied_index"].GetGauge().GetValue() == float64(st.Applied) &&
			m["kvd_raft_commit_index"].GetGauge().GetValue() == float64(st.Commit)
	})
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

// peerGauge is the value of gauge name for peer id in reg, and whether
// the series exists.
func peerGauge(t *testing.T, reg *prometheus.Registry, name string, id uint64) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "peer" && lp.GetValue() == strconv.FormatUint(id, 10) {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestUnreachableLearnerIsShown: the leader shows a learner it has never
// heard from (its node not started) as unreachable, in kvd_peer_reachable
// and in a warning, and as reachable, with a last contact, once it runs.
// Without observePeers nothing on any node showed it.
func TestUnreachableLearnerIsShown(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs peertest.LogCapture
	cfg := testConfig()
	cfg.Registerer, cfg.Logger = reg, logs.Logger()
	c := newCluster(t, 1, cfg)
	lead := c.leader()
	n2 := c.reserve(2)
	if err := lead.node.AddMember(ctxT(t), 2, n2.addr); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "learner 2 shown unreachable", func() bool {
		v, ok := peerGauge(t, reg, "kvd_peer_reachable", 2)
		return ok && v == 0 && logs.Contains("learner unreachable") && logs.Contains("peer=2")
	})
	if _, ok := peerGauge(t, reg, "kvd_peer_last_contact_seconds", 2); ok {
		t.Fatal("a last contact with a learner that never ran")
	}
	c.base.Registerer, c.base.Logger = nil, peertest.Logger() // the registry is the leader's
	c.start(2, true)
	wait.For(t, "learner 2 shown reachable", func() bool {
		v, ok := peerGauge(t, reg, "kvd_peer_reachable", 2)
		_, heard := peerGauge(t, reg, "kvd_peer_last_contact_seconds", 2)
		return ok && v == 1 && heard
	})
}
