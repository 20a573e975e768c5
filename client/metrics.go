package client

import "github.com/prometheus/client_golang/prometheus"

// One-sided GETs never reach a server, so their costs can only be counted
// where they happen: here. An application exports them by registering
// Collector with its Prometheus registry.
var (
	descGets       = prometheus.NewDesc("kvd_client_gets_total", "GET calls.", nil, nil)
	descRounds     = prometheus.NewDesc("kvd_client_get_round_trips_total", "Network round trips spent by successful one-sided GETs.", nil, nil)
	descRPCGets    = prometheus.NewDesc("kvd_client_rpc_gets_total", "GETs answered by RPC (asked for, or fallen back to).", nil, nil)
	descFallbacks  = prometheus.NewDesc("kvd_client_get_fallbacks_total", "One-sided GETs that gave up and asked by RPC.", nil, nil)
	descGetRetries = prometheus.NewDesc("kvd_client_get_retries_total", "One-sided GET attempts retried, by reason.", []string{"reason"}, nil)
)

type collector struct{ c *Client }

// Collector exports the client's GET counters as Prometheus metrics
// (kvd_client_*), including retries by reason (torn, stale, unstable,
// lease, slow, geometry, connection).
func (c *Client) Collector() prometheus.Collector { return collector{c} }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGets, descRounds, descRPCGets, descFallbacks, descGetRetries} {
		ch <- d
	}
}

func (k collector) Collect(ch chan<- prometheus.Metric) {
	s := k.c.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descGets, s.Gets)
	counter(descRounds, s.OneSidedRounds)
	counter(descRPCGets, s.RPCGets)
	counter(descFallbacks, s.Fallbacks)
	for reason, n := range s.Retries {
		counter(descGetRetries, n, reason)
	}
}
