package etcdseries

import "strconv"

// Point is one measurement: a benchmark command line without the
// endpoints, run against every target in every round.
type Point struct {
	// Name is the workload: put, range-l, range-s, txn-put,
	// watch-latency, lease-keepalive.
	Name    string `json:"name"`
	Clients int    `json:"clients"`
	Conns   int    `json:"conns"`
	// Args follow the global flags: the command and its flags.
	Args []string `json:"args"`
	// Report is the title of the report whose latencies the table gives
	// ("" or, for watch-latency, "Watch events").
	Report string `json:"report"`
	// NoRate: the report's requests/sec is not the workload's rate (a
	// watch's events are timed after the run), so the table shows none.
	NoRate bool `json:"no_rate,omitempty"`
}

// Workload sizes, as etcd's published figures: 8-byte keys, 256-byte
// values; writes spread over KeySpace keys.
const (
	KeySize   = 8
	ValueSize = 256
	KeySpace  = 10000
	// RangeKey is the single key the range points read; the run writes it
	// (ValueSize bytes) to every target first.
	RangeKey = "kvd-bench-range"
)

// workload is one of the tool's commands at the series' sizes.
type workload struct {
	name string
	// totals are the request totals at 1 client and at more, before
	// Config.Scale: a few seconds per point against etcd with fsync on a
	// shared 2-core machine.
	totals [2]int
	args   func(total string) []string
}

var workloads = []workload{
	{"put", [2]int{300, 3000}, func(t string) []string { return append([]string{"put", t}, kvFlags()...) }},
	{"range-l", [2]int{1000, 10000}, func(t string) []string { return []string{"range", RangeKey, t, "--consistency", "l"} }},
	{"range-s", [2]int{1000, 10000}, func(t string) []string { return []string{"range", RangeKey, t, "--consistency", "s"} }},
	{"txn-put", [2]int{300, 3000}, func(t string) []string { return append([]string{"txn-put", t, "--txn-ops", "1"}, kvFlags()...) }},
	{"lease-keepalive", [2]int{1000, 10000}, func(t string) []string { return []string{"lease-keepalive", t} }},
}

func kvFlags() []string {
	return []string{"--key-size", strconv.Itoa(KeySize), "--val-size", strconv.Itoa(ValueSize), "--key-space-size", strconv.Itoa(KeySpace)}
}

// Plan lists the points of a run: every workload at every client count,
// and one watch-latency point (10 streams of 10 watchers on one key,
// cfg.WatchPuts puts at 100/s).
func Plan(cfg Config) []Point {
	cfg = cfg.withDefaults()
	var ps []Point
	for _, w := range workloads {
		for _, c := range cfg.Clients {
			t := w.totals[0]
			if c > 1 {
				t = w.totals[1]
			}
			t = max(1, int(float64(t)*cfg.Scale))
			ps = append(ps, Point{Name: w.name, Clients: c, Conns: conns(c), Args: w.args("--total=" + strconv.Itoa(t))})
		}
	}
	ps = append(ps, Point{Name: "watch-latency", Clients: 1, Conns: 1, Report: "Watch events", NoRate: true,
		Args: []string{"watch-latency", "--streams", "10", "--watchers-per-stream", "10",
			"--put-total", strconv.Itoa(cfg.WatchPuts), "--put-rate", "100",
			"--key-size", strconv.Itoa(KeySize), "--val-size", strconv.Itoa(ValueSize)}})
	return ps
}

// conns shares gRPC connections between clients as etcd's published runs
// do (100 connections for 1000 clients): one per 8 clients.
func conns(clients int) int { return max(1, clients/8) }
