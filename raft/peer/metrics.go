package peer

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the peer layer's Prometheus series. They are not registered
// here: the node registers Collectors with its own, so that one Registerer
// holds them all.
type Metrics struct {
	// RefusedTotal counts peer sessions refused at the hello, by reason;
	// DroppedTotal counts messages of accepted sessions dropped before
	// raft, by reason.
	RefusedTotal, DroppedTotal *prometheus.CounterVec
}

// NewMetrics returns the series, every reason showing at 0.
func NewMetrics() *Metrics {
	m := &Metrics{
		RefusedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvd_raft_peer_refused_total",
			Help: "Peer connections refused at the hello (another cluster, not a member, malformed...), by reason.",
		}, []string{"reason"}),
		DroppedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvd_raft_peer_messages_dropped_total",
			Help: "Messages from accepted peers dropped before raft (wrong sender, forbidden type, malformed...), by reason.",
		}, []string{"reason"}),
	}
	for _, r := range refusalReasons {
		m.RefusedTotal.WithLabelValues(string(r))
	}
	for _, r := range dropReasons {
		m.DroppedTotal.WithLabelValues(string(r))
	}
	return m
}

// Collectors are the series to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.RefusedTotal, m.DroppedTotal}
}

// Refused counts a refused peer session.
func (m *Metrics) Refused(r Refusal) { m.RefusedTotal.WithLabelValues(string(r)).Inc() }

// Dropped counts a dropped peer message.
func (m *Metrics) Dropped(r DropReason) { m.DroppedTotal.WithLabelValues(string(r)).Inc() }
