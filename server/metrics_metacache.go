package server

import (
	"github.com/prometheus/client_golang/prometheus"

	kvstore "github.com/kvd-project/kvd/internal/store"
)

// metaCacheCollectors show the apply path's cache of keys' metadata
// (internal/store): whether it is complete, so that a write of a new key
// reads nothing from Pebble, and how many lookups that answered. Read at
// scrape time from the store's atomics.
func metaCacheCollectors(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvd_store_meta_cache_complete",
			Help: "1 while the apply path's key metadata cache holds every key of the applied state, so that a write of a new key " +
				"needs no Pebble read; 0 once it lost a key (too many keys for it, or an event that cleared it) until the next restart or snapshot install."},
			func() float64 { return boolGauge(s.metaCacheStats().Complete) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvd_store_meta_cache_absent_hits_total",
			Help: "Lookups of a key's metadata or lease the complete key metadata cache answered as absent without a Pebble read."},
			func() float64 { return float64(s.metaCacheStats().AbsentHits) }),
	}
}

// metaCacheStats are the store's key metadata cache's; zero once the
// store is closed.
func (s *Server) metaCacheStats() kvstore.MetaCacheStats {
	st, release, err := s.node.Acquire()
	if err != nil {
		return kvstore.MetaCacheStats{}
	}
	defer release()
	return st.MetaCacheStats()
}
