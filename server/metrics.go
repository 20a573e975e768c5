package server

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/internal/mirror"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// metrics are the server's own Prometheus series (the Raft node registers
// its own). One-sided GETs never reach the server, so they are counted by
// clients, not here: that is the point.
type metrics struct {
	reg      prometheus.Registerer
	cs       []prometheus.Collector
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	ops      [1 << 8]atomic.Pointer[opSeries] // by wire.Op (series)

	// Connections refused, or closed for breaking a limit, by reason
	// (limits.go).
	connRefusals *prometheus.CounterVec

	// Watches refused or dropped, by reason, and events sent (watch.go).
	watchRefusals *prometheus.CounterVec
	watchEvents   prometheus.Counter
	// Backup streams by outcome (snapshot.go).
	snapshots *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvd_requests_total", Help: "Client RPCs served, by op and status.",
		}, []string{"op", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kvd_request_duration_seconds", Help: "Time to serve a client RPC, by op.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"op"}),
	}
	table := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func(mirror.Counts) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(s.mirror.Counts())) })
	}
	m.cs = []prometheus.Collector{m.requests, m.latency,
		table("kvd_region_lease_valid", "1 while the region header shows a valid lease.",
			func() float64 { return boolGauge(s.mirror.LeaseValid()) }),
		// Writes refused at admission for lack of room (the leader), and
		// applied writes the region could not hold (any node; the region
		// is then flagged incomplete until repaired).
		counter("kvd_table_admission_refusals_total",
			"PUTs the leader refused before proposing them because the table region could not hold them (no space).",
			func(c mirror.Counts) uint64 { return c.Refusals }),
		counter("kvd_table_apply_misses_total",
			"Applied writes the table region could not hold; the region is flagged incomplete until they are repaired.",
			func(c mirror.Counts) uint64 { return c.ApplyMisses }),
		counter("kvd_table_repacks_total",
			"Region rebuilds run because free space was too cut up to place keys an apply missed (repair loop).",
			func(c mirror.Counts) uint64 { return c.Repacks }),
		table("kvd_table_keys", "Keys in the table region.", func() float64 { return float64(s.tableStats().Keys) }),
		table("kvd_table_key_capacity", "The most keys the leader admits into the table region (15/16 of its slots).",
			func() float64 { return float64(s.tableStats().KeyCapacity) }),
		table("kvd_table_bytes_used", "Record bytes in use in the table region.", func() float64 { return float64(s.tableStats().BytesUsed) }),
		table("kvd_table_bytes_reserved", "Record bytes set aside for admitted writes not yet applied.",
			func() float64 { return float64(s.tableStats().BytesReserved) }),
		table("kvd_table_bytes_limbo", "Dead record bytes waiting out the reuse grace period.", func() float64 { return float64(s.tableStats().BytesLimbo) }),
		table("kvd_table_bytes_free", "Record bytes free for new records.", func() float64 { return float64(s.tableStats().BytesFree) }),
		table("kvd_table_largest_free_bytes", "The largest free extent of the record area: no longer record fits now.",
			func() float64 { return float64(s.tableStats().LargestFree) }),
		table("kvd_table_fill_ratio", "How full the table region is, 0 to 1: the larger of keys (with new keys in flight) over the key capacity "+
			"and live, reserved and limbo bytes over the record area. Writes are refused at 1.",
			func() float64 { return s.tableStats().Fill() }),
		table("kvd_region_bytes", "Size of the registered table region.", func() float64 { return float64(s.cfg.TableMem) }),
		table("kvd_table_incomplete", "1 while the table region is flagged incomplete: it may lack keys this node holds "+
			"(a rebuild, or an applied write it could not hold), so one-sided misses are asked by RPC. "+
			"It clears a grace period after the last key was put back.",
			func() float64 { return boolGauge(s.TableHeader().Incomplete) }),
		table("kvd_table_slots_pending", "Slots of keys taken out of the region that the node still holds, "+
			"kept (their records dead) until the region has been flagged incomplete for a grace period.",
			func() float64 { return float64(s.tableStats().SlotsPending) }),
		table("kvd_table_arena_bytes", "Bytes of the buckets' arenas, where records of at most --table-inline bytes live beside their slots (0 without).",
			func() float64 { return float64(s.tableStats().ArenaBytes) }),
		table("kvd_table_arena_bytes_used", "Arena bytes holding live inline records.", func() float64 { return float64(s.tableStats().ArenaUsed) }),
		table("kvd_table_arena_bytes_limbo", "Arena bytes of superseded inline records waiting out --table-inline-grace.",
			func() float64 { return float64(s.tableStats().ArenaLimbo) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvd_table_inline_spills_total",
			Help: "Small records written (or moved) to the record area because their bucket's arena had no room: a GET of one takes a second round trip."},
			func() float64 { return float64(s.tableStats().Spills) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvd_table_arena_packs_total",
			Help: "Arenas packed during a rebuild because the rebuild's own moves had cut up their free bytes (instead of spilling a record)."},
			func() float64 { return float64(s.tableStats().Packs) }),
	}
	m.connRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvd_connections_refused_total",
		Help: "Connections refused, or closed for breaking a limit, by reason: max_connections, handshake, idle_timeout, " +
			"read_timeout, write_timeout, protocol, read_batch_too_large (transport); slow_reader, malformed_request (server).",
	}, []string{"reason"})
	for _, r := range transport.RefusalReasons() {
		m.connRefusals.WithLabelValues(r) // every reason shows, at 0
	}
	m.cs = append(m.cs, m.connRefusals, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvd_connections", Help: "Connections the server holds (clients' and peers'), against --max-connections.",
	}, func() float64 { return float64(s.connCount()) }))
	m.cs = append(m.cs, watchCollectors(m, s)...)
	m.snapshots = newSnapshotCounter()
	m.cs = append(m.cs, m.snapshots)
	m.cs = append(m.cs, rdmaCollectors(s.cfg.Transport)...)
	m.cs = append(m.cs, newWALCollector(s))
	m.cs = append(m.cs, indexCollectors(s)...)
	if reg != nil {
		for _, c := range m.cs {
			reg.MustRegister(c)
		}
	}
	return m
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.cs {
		m.reg.Unregister(c)
	}
}

func (m *metrics) observe(op wire.Op, st wire.Status, d time.Duration) {
	s := m.series(op)
	if st == wire.StatusOK {
		s.ok.Inc()
	} else {
		m.requests.WithLabelValues(op.String(), statusName(st)).Inc()
	}
	s.latency.Observe(d.Seconds())
}

// opSeries are one op's series that every request of it touches: looking
// them up by label values hashes the labels and takes the vector's lock,
// for each request.
type opSeries struct {
	ok      prometheus.Counter // kvd_requests_total{op, status="ok"}
	latency prometheus.Observer
}

// series returns op's series, made at its first request.
func (m *metrics) series(op wire.Op) *opSeries {
	if s := m.ops[op].Load(); s != nil {
		return s
	}
	// Two first requests may both get here: the vectors hand both the
	// same children.
	s := &opSeries{
		ok:      m.requests.WithLabelValues(op.String(), statusName(wire.StatusOK)),
		latency: m.latency.WithLabelValues(op.String()),
	}
	m.ops[op].Store(s)
	return s
}

func statusName(st wire.Status) string {
	switch st {
	case wire.StatusOK:
		return "ok"
	case wire.StatusNotFound:
		return "not_found"
	case wire.StatusNotLeader:
		return "not_leader"
	case wire.StatusNoSpace:
		return "no_space"
	case wire.StatusUnavailable:
		return "unavailable"
	case wire.StatusLeaseNotFound:
		return "lease_not_found"
	case wire.StatusCompacted:
		return "compacted"
	case wire.StatusFutureRevision:
		return "future_revision"
	case wire.StatusLeaseExists:
		return "lease_exists"
	}
	return "status_" + strconv.Itoa(int(st))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// tableStats reads the table's counters under the table lock.
func (s *Server) tableStats() table.Stats { return s.mirror.Stats() }

// TableStats is the table region's space and its admission counters, as
// /metrics shows them.
type TableStats struct {
	table.Stats
	// Fill is Stats.Fill: kvd_table_fill_ratio, shown by kvctl status.
	Fill float64
	// Refusals counts PUTs this node refused at admission (as leader) for
	// lack of room.
	Refusals uint64
	// ApplyMisses counts applied writes the region could not hold.
	ApplyMisses uint64
	// Repacks counts rebuilds the repair loop ran because free space was
	// too cut up to place missing keys.
	Repacks uint64
}

// TableStats reports the table region's space and admission counters.
func (s *Server) TableStats() TableStats {
	st, c := s.tableStats(), s.mirror.Counts()
	return TableStats{Stats: st, Fill: st.Fill(), Refusals: c.Refusals, ApplyMisses: c.ApplyMisses, Repacks: c.Repacks}
}
