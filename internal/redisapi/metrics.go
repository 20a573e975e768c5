package redisapi

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Server's Prometheus series.
type metrics struct {
	cs       []prometheus.Collector
	commands *prometheus.CounterVec
	refusals *prometheus.CounterVec
	conns    prometheus.Gauge
	retries  prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvd_redis_commands_total", Help: "Redis commands served, by command (unknown: any not served) and outcome (ok, error).",
		}, []string{"command", "outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvd_redis_refusals_total", Help: "Redis connections refused or closed by a limit or a protocol error, by reason.",
		}, []string{"reason"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvd_redis_connections", Help: "Redis connections open.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvd_redis_rmw_retries_total", Help: "Read-modify-write commands run again because a key they read changed before they committed.",
		}),
	}
	m.cs = []prometheus.Collector{m.commands, m.refusals, m.conns, m.retries}
	return m
}
