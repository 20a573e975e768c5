package server

import "github.com/prometheus/client_golang/prometheus"

// watchCollectors makes the watch series (watch.go): refusals by reason,
// events sent, and the gauges of the history and open watches.
func watchCollectors(m *metrics, s *Server) []prometheus.Collector {
	m.watchRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvd_watch_refusals_total",
		Help: "Watches refused or dropped, by reason: max_watches_per_conn, max_watches (per node), " +
			"compacted (asked for history this node no longer holds), slow_watcher (fell behind the history and was dropped), " +
			"no_leader (the node had no leader: refused or ended, to resume elsewhere).",
	}, []string{"reason"})
	for _, r := range watchRefusalReasons {
		m.watchRefusals.WithLabelValues(r)
	}
	m.watchEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvd_watch_events_sent_total", Help: "Watch events sent to clients.",
	})
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	return []prometheus.Collector{m.watchRefusals, m.watchEvents,
		gauge("kvd_watches", "Watches open on this node, against Config.Watch.MaxWatchers.",
			func() float64 { return float64(s.hub.Watchers()) }),
		gauge("kvd_watch_history_events", "Events held in this node's watch history.",
			func() float64 { n, _ := s.hub.Len(); return float64(n) }),
		gauge("kvd_watch_history_bytes", "Bytes of keys and values held in this node's watch history.",
			func() float64 { _, b := s.hub.Len(); return float64(b) }),
	}
}
