package server

import (
	"github.com/prometheus/client_golang/prometheus"

	kvstore "github.com/kvd-project/kvd/internal/store"
)

// indexCollectors show the size of the store's key index (internal/store),
// which keeps every key and every write of the history above the
// compaction point in memory: what compaction keeps it to. Read at scrape
// time.
func indexCollectors(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvd_store_index_keys",
			Help: "Keys in the store's in-memory key index: those of the state, and deleted ones whose tombstone compaction has not dropped yet."},
			func() float64 { return float64(s.indexStats().Keys) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvd_store_index_revisions",
			Help: "Writes the store's in-memory key index holds: the history above the compaction point, and each key's last write at or below it."},
			func() float64 { return float64(s.indexStats().Revisions) }),
	}
}

// indexStats are the store's key index's; zero once the store is closed.
func (s *Server) indexStats() kvstore.IndexStats {
	st, release, err := s.node.Acquire()
	if err != nil {
		return kvstore.IndexStats{}
	}
	defer release()
	return st.IndexStats()
}
