package kv

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/internal/promreg"
)

// metrics are the state machine's Prometheus series (registered with the
// node's Registerer). They exist unregistered without one, so the code
// updating them needs no checks.
type metrics struct {
	// TTL leases: revoked by expiry, and requests refused by a lease
	// limit (max_leases, max_lease_keys).
	leasesExpired prometheus.Counter
	leaseRefusals *prometheus.CounterVec
	// compactions of the history applied (every node counts).
	compactions prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		leasesExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvd_lease_expired_total",
			Help: "TTL leases revoked by expiry (counted by every node as it applies the revoke).",
		}),
		leaseRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvd_lease_refused_total",
			Help: "Lease grants and lease PUTs refused by a limit when applied (every node counts), by limit: max_leases, max_lease_keys.",
		}, []string{"limit"}),
	}
	m.compactions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvd_compactions_total",
		Help: "Compactions of the stored history applied (every node counts its own).",
	})
	m.leaseRefusals.WithLabelValues("max_leases")
	m.leaseRefusals.WithLabelValues("max_lease_keys")
	if err := promreg.Register(reg, m.collectors()); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.leasesExpired, m.leaseRefusals, m.compactions}
}

// unregister removes the series so a reopened store can register again.
func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	promreg.Unregister(reg, m.collectors())
}

// leaseRefused counts a request refused by a lease limit.
func (m *metrics) leaseRefused(limit string) {
	m.leaseRefusals.WithLabelValues(limit).Inc()
}
