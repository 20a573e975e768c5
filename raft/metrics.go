package raft

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/internal/promreg"
	"github.com/kvd-project/kvd/raft/peer"
)

// metrics are the node's Prometheus series. They exist (unregistered) even
// without a Registerer so that the code updating them needs no checks.
type metrics struct {
	term, leaderID, isLeader, commit, applied, leaseValid prometheus.Gauge
	committed, failed, leaderChanges                      prometheus.Counter
	syncDuration                                          prometheus.Histogram
	// proposalBatch counts the commands proposed together in one raft
	// message (flushProposals): the batching across connections, at a
	// glance (sum/count is the mean batch).
	proposalBatch prometheus.Histogram
	// proposalsHeld is how many commands wait for the leader's previous
	// batch to commit (batchHeld): a figure that stays high means commits
	// are slow, not that the node is idle.
	proposalsHeld prometheus.Gauge
	// peer are the peer layer's: sessions refused, messages dropped.
	peer *peer.Metrics
	// followerDataLost counts a follower's append rejections showing it
	// lost entries it had acknowledged (lostlog.go).
	followerDataLost prometheus.Counter
	// reach are the per-peer reachability series (reach.go).
	reach reachMetrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &metrics{
		term:          gauge("kvd_raft_term", "Current raft term."),
		leaderID:      gauge("kvd_raft_leader_id", "Id of the leader this node follows, 0 if none."),
		isLeader:      gauge("kvd_raft_is_leader", "1 if this node is the leader."),
		commit:        gauge("kvd_raft_commit_index", "Raft commit index."),
		applied:       gauge("kvd_raft_applied_index", "Index of the last entry applied to the durable state."),
		leaseValid:    gauge("kvd_raft_lease_valid", "1 while this node holds a valid read lease."),
		committed:     counter("kvd_raft_proposals_committed_total", "Local proposals committed and applied."),
		failed:        counter("kvd_raft_proposals_failed_total", "Local proposals that failed (dropped, leadership lost, stopped)."),
		leaderChanges: counter("kvd_raft_leader_changes_total", "Times the known leader changed."),
		followerDataLost: counter("kvd_raft_follower_data_lost_total",
			"On the leader: append rejections from a follower whose log ends below an index it acknowledged (its data directory was lost or replaced)."),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kvd_raft_sync_duration_seconds",
			Help:    "Duration of the durable write per raft Ready: the synced Pebble batch, or with --raft-log=wal the log's write and fdatasync and the Pebble batch.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		proposalBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kvd_raft_proposal_batch_size",
			Help:    "Commands proposed together in one raft message (one append per follower, one fsync).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. maxBatch
		}),
		proposalsHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvd_raft_proposals_held",
			Help: "Commands the leader holds for its next batch while its previous batch is uncommitted.",
		}),
		peer:  peer.NewMetrics(),
		reach: newReachMetrics(),
	}
	if err := promreg.Register(reg, m.collectors()); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.term, m.leaderID, m.isLeader, m.commit, m.applied, m.leaseValid,
		m.committed, m.failed, m.leaderChanges, m.syncDuration, m.proposalBatch, m.proposalsHeld,
		m.followerDataLost}, append(m.reach.collectors(), m.peer.Collectors()...)...)
}

// unregister removes the series so a reopened node can register again.
func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return // m may be nil then: a bare node without series
	}
	promreg.Unregister(reg, m.collectors())
}

// peerMetrics are the peer layer's series (nil m: unit tests' bare nodes,
// whose peer layer gets its own).
func (m *metrics) peerMetrics() *peer.Metrics {
	if m == nil {
		return nil
	}
	return m.peer
}

// dropped counts a peer message the loop dropped (nil m as for
// peerMetrics).
func (m *metrics) dropped(r peer.DropReason) {
	if m != nil {
		m.peer.Dropped(r)
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
