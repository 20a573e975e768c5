package result

import (
	"errors"
	"time"

	"github.com/kvd-project/kvd/bench/latency"
)

// ErrFormat: a file is not a kvbench report (or a CSV with other columns).
var ErrFormat = errors.New("result: not a kvbench report")

// SchemaVersion is written into every Report; readers refuse newer ones.
const SchemaVersion = 1

// Report is everything one kvbench invocation measured, or several merged.
type Report struct {
	Schema    int        `json:"schema"`
	Meta      []Meta     `json:"meta"`
	Runs      []Run      `json:"runs"`
	Baselines []Baseline `json:"baselines,omitempty"`
}

// Meta describes where and how a set of runs was measured. A merged report
// keeps one Meta per source.
type Meta struct {
	Series    string    `json:"series"`
	Host      string    `json:"host"`
	CPUs      int       `json:"cpus"`
	GoVersion string    `json:"go_version"`
	Started   time.Time `json:"started"`
	Args      []string  `json:"args,omitempty"`
	Cluster   string    `json:"cluster"` // "3 nodes started by kvbench" or the endpoints given
	// IdleServerCPU is the servers' CPU use with no load, in cores
	// (CPU-seconds per second), measured before the runs; each run's
	// ServerCPUNetPerOp subtracts it.
	IdleServerCPU float64 `json:"idle_server_cpu"`
	Notes         string  `json:"notes,omitempty"`
}

// Run is one measured point: a workload at one concurrency (or rate)
// against one cluster.
type Run struct {
	// Series groups runs that belong on one line of a plot, e.g. "tcp" or
	// "rdma" (several kvbench invocations merge into one report by series).
	Series      string  `json:"series"`
	Transport   string  `json:"transport"`
	Mix         string  `json:"mix"` // "95/5": percent GETs / PUTs
	ReadPct     int     `json:"read_pct"`
	Consistency string  `json:"consistency"`
	Dist        string  `json:"dist"`
	Keys        int     `json:"keys"`
	KeySize     int     `json:"key_size"`
	ValueSize   int     `json:"value_size"`
	Mode        string  `json:"mode"` // "closed" or "open"
	Clients     int     `json:"clients"`
	Conns       int     `json:"conns"`       // client.Client instances the clients share
	TargetRate  float64 `json:"target_rate"` // open loop only, ops/s
	Seconds     float64 `json:"seconds"`     // measured wall time

	Ops    uint64 `json:"ops"`
	Gets   uint64 `json:"gets"`
	Puts   uint64 `json:"puts"`
	Errors uint64 `json:"errors"`
	Misses uint64 `json:"misses"` // GETs that found no key (not errors)
	// Conflicts: CAS operations (mix "cas", counted in Puts) whose version
	// condition failed: answers, not errors.
	Conflicts uint64 `json:"conflicts,omitempty"`
	// Scans: range scans (mix "scan", YCSB-E; counted in Gets), and the
	// keys they returned together.
	Scans      uint64  `json:"scans,omitempty"`
	ScanKeys   uint64  `json:"scan_keys,omitempty"`
	Throughput float64 `json:"throughput"` // ops/s

	Lat    latency.Summary `json:"lat"`
	GetLat latency.Summary `json:"get_lat"`
	PutLat latency.Summary `json:"put_lat"`
	CDF    []latency.Point `json:"cdf,omitempty"`

	// From client.Stats, differences over the run. ClientGets is the
	// client's own count of GETs in that window (it differs from Gets by
	// the few in flight at the window's edges, and counts failed GETs).
	ClientGets uint64 `json:"client_gets"`
	// OneSided is the GETs the client answered one-sided (client.Stats):
	// failed GETs are in ClientGets but neither here nor in RPCGets.
	OneSided       uint64 `json:"one_sided_gets"`
	OneSidedRounds uint64 `json:"one_sided_rounds"`
	// OneSidedReads and OneSidedBytes are the READs the successful
	// one-sided GETs posted over all their round trips, and the bytes
	// those READs fetched (client.Stats, same basis as OneSidedRounds).
	OneSidedReads uint64            `json:"one_sided_reads"`
	OneSidedBytes uint64            `json:"one_sided_bytes"`
	RPCGets       uint64            `json:"rpc_gets"`
	Fallbacks     uint64            `json:"fallbacks"`
	Retries       uint64            `json:"retries"`
	RetryReasons  map[string]uint64 `json:"retry_reasons,omitempty"`

	// Server CPU (user+system of every server process) over the run, in
	// seconds, and per operation in microseconds: gross, and net of the
	// idle rate in Meta.IdleServerCPU. Zero when no server PIDs were known.
	ServerCPU         float64 `json:"server_cpu_s"`
	ServerCPUPerOp    float64 `json:"server_cpu_us_per_op"`
	ServerCPUNetPerOp float64 `json:"server_cpu_net_us_per_op"`
	ServerPIDs        int     `json:"server_pids"`

	// Ratios compare the run's GET and PUT latencies with the baselines;
	// filled in by Report.ComputeRatios.
	Ratios []Ratio `json:"ratios,omitempty"`

	Note string `json:"note,omitempty"`
}

// OneSidedGets is how many GETs were answered by one-sided READs. A
// report written before OneSided was recorded (0 with one-sided READs
// counted) gives ClientGets less RPCGets, which counts failed GETs too.
func (r *Run) OneSidedGets() uint64 {
	switch {
	case r.OneSided > 0 || r.OneSidedRounds == 0:
		return r.OneSided
	case r.RPCGets >= r.ClientGets:
		return 0
	}
	return r.ClientGets - r.RPCGets
}

// RoundsPerGet is the network round trips per GET: the one-sided GETs'
// READ batches plus one per RPC GET, over all GETs. 0 without GETs.
func (r *Run) RoundsPerGet() float64 {
	if r.ClientGets == 0 {
		return 0
	}
	return float64(r.OneSidedRounds+r.RPCGets) / float64(r.ClientGets)
}

// RoundsPerOneSidedGet is the READ round trips per one-sided GET (1 with a
// cached location, 2 without). 0 without one-sided GETs.
func (r *Run) RoundsPerOneSidedGet() float64 {
	n := r.OneSidedGets()
	if n == 0 {
		return 0
	}
	return float64(r.OneSidedRounds) / float64(n)
}

// ReadsPerOneSidedGet is the READs per one-sided GET (header, buckets,
// records: what a NIC serves for it). 0 without one-sided GETs, and for
// reports from before the count existed.
func (r *Run) ReadsPerOneSidedGet() float64 {
	n := r.OneSidedGets()
	if n == 0 {
		return 0
	}
	return float64(r.OneSidedReads) / float64(n)
}

// BytesPerOneSidedGet is the bytes READ per one-sided GET, value and
// metadata. 0 without one-sided GETs.
func (r *Run) BytesPerOneSidedGet() float64 {
	n := r.OneSidedGets()
	if n == 0 {
		return 0
	}
	return float64(r.OneSidedBytes) / float64(n)
}

// Baseline is a raw transport round trip of a given size, measured with no
// kvd code involved: the floor kvd's latencies are compared with.
type Baseline struct {
	Series    string `json:"series"`
	Transport string `json:"transport"` // "tcp" or "rdma"
	// Kind is the operation measured: KindTCPRead (small request, Bytes
	// reply), KindTCPWrite (Bytes request, small reply), KindRDMARead
	// (ib_read_lat) or KindRDMASend (ib_send_lat).
	Kind  string `json:"kind"`
	Bytes int    `json:"bytes"`
	Iters int64  `json:"iters"`
	// Lat is a full round trip. perftest's send latency is half a
	// ping-pong; it is doubled into Lat and RTTFactor says so.
	Lat       latency.Summary `json:"lat"`
	RTTFactor int             `json:"rtt_factor"`
	Source    string          `json:"source"`
}

// Baseline kinds.
const (
	KindTCPRead  = "tcp-read"
	KindTCPWrite = "tcp-write"
	KindRDMARead = "ib_read_lat"
	KindRDMASend = "ib_send_lat"
)
