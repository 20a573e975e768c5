package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kvd-project/kvd/bench/latency"
	"github.com/kvd-project/kvd/bench/result"
)

// Image is a plot to link from the report.
type Image struct {
	Title string
	Path  string // relative to the markdown file
}

// Options adjust the markdown.
type Options struct {
	// Title heads the document. Default "kvd benchmark".
	Title string
	// Images are linked after the tables.
	Images []Image
}

// Markdown writes the whole report. It does not modify rep: ratios to the
// baselines are computed on a copy.
func Markdown(w io.Writer, rep *result.Report, o Options) error {
	if o.Title == "" {
		o.Title = "kvd benchmark"
	}
	cp := *rep
	cp.Runs = slices.Clone(rep.Runs)
	cp.ComputeRatios()
	rep = &cp

	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", o.Title)
	writeSources(&b, rep.Meta)
	sections := []struct {
		title string
		intro string
		t     *table
	}{
		{"Throughput and latency", "All operations of each run; latencies in µs. ×base: kvd's latency over a raw round trip of the same size on the same transport (see Baselines).", RunsTable(rep)},
		{"Per-operation latency", "Latencies in µs, by operation type.", opsTable(rep)},
		{"One-sided and RPC GETs", "100% GET runs: one-sided READs (linearizable, serializable) against RPC GETs (readindex) at the same load. READs/GET and B/GET: READs posted and bytes fetched per one-sided GET, over all its round trips. CPU is the servers' user+system time per GET; net subtracts their idle use.", getPathTable(rep)},
		{"One client instance per client", "Closed-loop runs where each of at least " + fmt.Sprint(manyInstances) + " clients has its own client instance (its own connections), so the servers see that many connections: the shape where per-connection costs show. CPU is the servers' user+system time per operation (all nodes together).", instancesTable(rep)},
		{"Against perftest", "One-client GET-only and PUT-only runs over RDMA next to perftest's raw round trip of the nearest size, measured in the same run: one-sided GETs against `ib_read_lat`, RPC GETs and PUTs against `ib_send_lat` (doubled: a full round trip). p50 in µs.", perftestTable(rep)},
		{"Compare-and-swap contention", "Runs of the `cas` mix: every operation reads a key's version and writes the key back on condition that it is still that version (`PutVersion` with `IfVersion`), so clients racing for the same keys conflict. ops/s and latencies are of whole read-modify-writes; conflicts: CASes refused because another write came first (answers, not errors).", casTable(rep)},
		{"Range scans (YCSB-E)", "Runs of the `scan` mix: 95% short range scans (`Range` from a drawn key, `WithLimit` drawn uniformly from 1 to the scan length, 100 by default, as YCSB-E) and 5% inserts of new keys. ops/s and p50/p99 are of all operations; scan and insert p50 by kind; keys/scan: keys returned per scan on average.", scanTable(rep)},
		{"TLS cost", "Each run of a series `S+tls` (kvd with TLS on) next to the same point of series `S` (plaintext): ×: TLS over plaintext. CPU is the servers' user+system time per operation.", tlsTable(rep)},
		{"Baselines", "Raw transport round trips, no kvd code involved; µs.", baselinesTable(rep)},
	}
	for _, s := range sections {
		if len(s.t.rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", s.title, s.intro)
		if err := s.t.write(&b); err != nil {
			return err
		}
		b.WriteString("\n")
	}
	if len(o.Images) > 0 {
		b.WriteString("## Plots\n\n")
		for _, im := range o.Images {
			fmt.Fprintf(&b, "![%s](%s)\n\n", im.Title, im.Path)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary writes the main table only (the baselines table for a report
// without runs): what kvbench prints when it is done.
func Summary(w io.Writer, rep *result.Report) error {
	if len(rep.Runs) == 0 {
		return baselinesTable(rep).write(w)
	}
	cp := *rep
	cp.Runs = slices.Clone(rep.Runs)
	cp.ComputeRatios()
	return RunsTable(&cp).write(w)
}

func writeSources(b *strings.Builder, metas []result.Meta) {
	for _, m := range metas {
		fmt.Fprintf(b, "- **%s**: %s, %d CPUs, %s, started %s; cluster: %s; idle server CPU %.3f cores",
			m.Series, m.Host, m.CPUs, m.GoVersion, m.Started.UTC().Format(time.RFC3339), m.Cluster, m.IdleServerCPU)
		if m.Notes != "" {
			fmt.Fprintf(b, "; %s", m.Notes)
		}
		b.WriteString("\n")
	}
	if len(metas) > 0 {
		b.WriteString("\n")
	}
}

// load describes a run's offered load: its concurrency, or its rate.
func load(r *result.Run) string {
	if r.Mode == "open" {
		return fmt.Sprintf("open %.0f/s ≤%d", r.TargetRate, r.Clients)
	}
	return fmt.Sprintf("%d", r.Clients)
}

func consistency(r *result.Run) string {
	if r.ReadPct == 0 {
		return "–"
	}
	return r.Consistency
}

func ratioCell(r *result.Run, op string, p99 bool) string {
	x, ok := r.RatioFor(op)
	if !ok {
		return "–"
	}
	if p99 {
		return times(x.P99)
	}
	return times(x.P50)
}

// RunsTable is the main table: one row per run. rep's runs must have their
// ratios computed.
func RunsTable(rep *result.Report) *table {
	t := newTable("series", "mix", "consistency", "dist", ">value", ">clients", ">ops/s", ">p50", ">p99", ">p99.9", ">max",
		">GET p50 ×base", ">GET p99 ×base", ">PUT p50 ×base", ">errors", ">retries", ">rt/GET", ">READs/GET", ">B/GET",
		">srv CPU µs/op", ">net µs/op")
	for i := range rep.Runs {
		r := &rep.Runs[i]
		gross, net := "–", "–"
		if r.ServerPIDs > 0 {
			gross, net = cpu(r.ServerCPUPerOp), cpu(r.ServerCPUNetPerOp)
		}
		t.add(r.Series, r.Mix, consistency(r), r.Dist, bytes(r.ValueSize), load(r), rate(r.Throughput),
			us(r.Lat.P50), us(r.Lat.P99), us(r.Lat.P999), us(r.Lat.Max),
			ratioCell(r, "get", false), ratioCell(r, "get", true), ratioCell(r, "put", false),
			count(r.Errors), count(r.Retries), frac(r.RoundsPerGet()), frac(r.ReadsPerOneSidedGet()), perGet(r.BytesPerOneSidedGet()),
			gross, net)
	}
	return t
}

func opsTable(rep *result.Report) *table {
	t := newTable("series", "mix", "consistency", ">value", ">clients", "op", ">count", ">mean", ">p50", ">p90", ">p99", ">p99.9", ">max",
		">×base p50", ">×base p99", "baseline")
	for i := range rep.Runs {
		r := &rep.Runs[i]
		for _, op := range []struct {
			name string
			lat  latency.Summary
		}{{"get", r.GetLat}, {"put", r.PutLat}} {
			s := op.lat
			if s.Count == 0 {
				continue
			}
			base := "–"
			if x, ok := r.RatioFor(op.name); ok {
				base = fmt.Sprintf("%s %s (p50 %s)", x.Kind, bytes(x.BaseBytes), us(x.BaseP50))
			}
			t.add(r.Series, r.Mix, consistency(r), bytes(r.ValueSize), load(r), op.name, fmt.Sprintf("%d", s.Count),
				us(s.Mean), us(s.P50), us(s.P90), us(s.P99), us(s.P999), us(s.Max),
				ratioCell(r, op.name, false), ratioCell(r, op.name, true), base)
		}
	}
	return t
}

// getGroup is the load and key space at which GET paths are compared.
type getGroup struct {
	series, dist, mode string
	value, clients     int
	rate               float64
}

// getPathTable compares one-sided with RPC GETs at equal load. A merged
// report may hold the same point from several sweeps; a one-sided run is
// compared with the RPC run nearest to it in the report (the same sweep's).
func getPathTable(rep *result.Report) *table {
	t := newTable("series", "dist", ">value", ">clients", "GET path", ">ops/s", ">p50", ">p99", ">rt/GET",
		">READs/GET", ">B/GET", ">srv CPU µs/GET", ">net µs/GET", ">net CPU vs RPC")
	groups := map[getGroup][]int{}
	var order []getGroup
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.ReadPct != 100 {
			continue
		}
		g := getGroup{r.Series, r.Dist, r.Mode, r.ValueSize, r.Clients, r.TargetRate}
		if groups[g] == nil {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range order {
		idx := groups[g]
		slices.SortStableFunc(idx, func(a, b int) int {
			return cmp.Compare(pathRank(rep.Runs[a].Consistency), pathRank(rep.Runs[b].Consistency))
		})
		for _, i := range idx {
			r := &rep.Runs[i]
			path := "one-sided (" + r.Consistency + ")"
			gross, net, vs := "–", "–", "–"
			if r.Consistency == "readindex" {
				path = "RPC (readindex)"
			}
			if r.ServerPIDs > 0 {
				gross, net = cpu(r.ServerCPUPerOp), cpu(r.ServerCPUNetPerOp)
				if rpc := nearestRPC(rep, idx, i); rpc != nil && r.Consistency != "readindex" {
					vs = fmt.Sprintf("%.0f%%", 100*r.ServerCPUNetPerOp/rpc.ServerCPUNetPerOp)
				}
			}
			t.add(r.Series, r.Dist, bytes(r.ValueSize), load(r), path, rate(r.Throughput), us(r.GetLat.P50), us(r.GetLat.P99),
				frac(r.RoundsPerGet()), frac(r.ReadsPerOneSidedGet()), perGet(r.BytesPerOneSidedGet()), gross, net, vs)
		}
	}
	return t
}

// nearestRPC returns the readindex run among idx that pairs with run i:
// the first after it in the report (a sweep measures consistencies in
// order), else the last before it; nil if none has a CPU figure.
func nearestRPC(rep *result.Report, idx []int, i int) *result.Run {
	after, before := -1, -1
	for _, j := range idx {
		r := &rep.Runs[j]
		if r.Consistency != "readindex" || r.ServerPIDs == 0 || r.ServerCPUNetPerOp <= 0 {
			continue
		}
		if j > i && (after < 0 || j < after) {
			after = j
		}
		if j < i && j > before {
			before = j
		}
	}
	switch {
	case after >= 0:
		return &rep.Runs[after]
	case before >= 0:
		return &rep.Runs[before]
	}
	return nil
}

// manyInstances is the fewest clients, each with its own client instance,
// for a run to be listed in instancesTable.
const manyInstances = 16

// instancesTable lists the runs where every closed-loop client has its own
// client instance, and there are many (the 64-instance point).
func instancesTable(rep *result.Report) *table {
	t := newTable("series", "mix", "consistency", "dist", ">keys", ">value", ">clients", ">instances", ">ops/s", ">p50", ">p99",
		">errors", ">rt/GET", ">READs/GET", ">B/GET", ">srv CPU µs/op", ">net µs/op")
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Mode != "closed" || r.Conns != r.Clients || r.Clients < manyInstances {
			continue
		}
		gross, net := "–", "–"
		if r.ServerPIDs > 0 {
			gross, net = cpu(r.ServerCPUPerOp), cpu(r.ServerCPUNetPerOp)
		}
		t.add(r.Series, r.Mix, consistency(r), r.Dist, fmt.Sprint(r.Keys), bytes(r.ValueSize), load(r), fmt.Sprint(r.Conns),
			rate(r.Throughput), us(r.Lat.P50), us(r.Lat.P99), count(r.Errors),
			frac(r.RoundsPerGet()), frac(r.ReadsPerOneSidedGet()), perGet(r.BytesPerOneSidedGet()), gross, net)
	}
	return t
}

// scanTable lists the YCSB-E runs (mix "scan").
func scanTable(rep *result.Report) *table {
	t := newTable("series", "consistency", "dist", ">keys", ">clients", ">ops/s", ">p50", ">p99", ">scan p50", ">insert p50",
		">keys/scan", ">errors", ">srv CPU µs/op")
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Mix != "scan" {
			continue
		}
		per, gross := "–", "–"
		if r.Scans > 0 {
			per = fmt.Sprintf("%.1f", float64(r.ScanKeys)/float64(r.Scans))
		}
		if r.ServerPIDs > 0 {
			gross = cpu(r.ServerCPUPerOp)
		}
		t.add(r.Series, consistency(r), r.Dist, fmt.Sprint(r.Keys), load(r), rate(r.Throughput), us(r.Lat.P50), us(r.Lat.P99),
			us(r.GetLat.P50), us(r.PutLat.P50), per, count(r.Errors), gross)
	}
	return t
}

// casTable lists the compare-and-swap runs (mix "cas").
func casTable(rep *result.Report) *table {
	t := newTable("series", "consistency", "dist", ">keys", ">clients", ">ops/s", ">p50", ">p99", ">conflicts", ">conflict %", ">errors",
		">srv CPU µs/op")
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Mix != "cas" {
			continue
		}
		pct, gross := "–", "–"
		if r.Puts > 0 {
			pct = fmt.Sprintf("%.1f", 100*float64(r.Conflicts)/float64(r.Puts))
		}
		if r.ServerPIDs > 0 {
			gross = cpu(r.ServerCPUPerOp)
		}
		t.add(r.Series, consistency(r), r.Dist, fmt.Sprint(r.Keys), load(r), rate(r.Throughput), us(r.Lat.P50), us(r.Lat.P99),
			count(r.Conflicts), pct, count(r.Errors), gross)
	}
	return t
}

// perftestTable sets each one-client, single-operation RDMA run next to its
// perftest baseline. rep's runs must have their ratios computed.
func perftestTable(rep *result.Report) *table {
	t := newTable("series", "op", ">value", ">p50", ">p99", "perftest", ">perftest p50", ">p50 ×", ">p99 ×", ">rt/GET", ">READs/GET")
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Transport != "rdma" || r.Mode != "closed" || r.Clients != 1 || (r.ReadPct != 100 && r.ReadPct != 0) {
			continue
		}
		op, lat, name := "put", r.PutLat, "PUT"
		if r.ReadPct == 100 {
			op, lat, name = "get", r.GetLat, "GET one-sided ("+r.Consistency+")"
			if r.Consistency == "readindex" {
				name = "GET RPC (readindex)"
			}
		}
		x, ok := r.RatioFor(op)
		if !ok {
			continue
		}
		rt, reads := "–", "–"
		if op == "get" {
			rt, reads = frac(r.RoundsPerGet()), frac(r.ReadsPerOneSidedGet())
		}
		t.add(r.Series, name, bytes(r.ValueSize), us(lat.P50), us(lat.P99), x.Kind+" "+bytes(x.BaseBytes), us(x.BaseP50),
			times(x.P50), times(x.P99), rt, reads)
	}
	return t
}

func pathRank(c string) int {
	switch c {
	case "linearizable":
		return 0
	case "serializable":
		return 1
	}
	return 2
}

func baselinesTable(rep *result.Report) *table {
	t := newTable("series", "kind", ">bytes", ">iters", ">min", ">p50", ">mean", ">p99", ">p99.9", ">max", "source")
	for _, b := range rep.Baselines {
		src := b.Source
		if b.RTTFactor > 1 {
			src += fmt.Sprintf(" (×%d: perftest reports half a ping-pong)", b.RTTFactor)
		}
		t.add(b.Series, b.Kind, bytes(b.Bytes), fmt.Sprintf("%d", b.Iters), us(b.Lat.Min), us(b.Lat.P50), us(b.Lat.Mean),
			us(b.Lat.P99), us(b.Lat.P999), us(b.Lat.Max), src)
	}
	return t
}

// TLSSuffix marks a series measured with TLS on; tlsTable compares it with
// the series named without it.
const TLSSuffix = "+tls"

// pointKey is what makes two runs the same point, apart from their series.
type pointKey struct {
	mix, consistency, dist, mode string
	keys, keySize, value         int
	clients, conns               int
	rate                         float64
}

func keyOf(r *result.Run) pointKey {
	return pointKey{r.Mix, consistency(r), r.Dist, r.Mode, r.Keys, r.KeySize, r.ValueSize, r.Clients, r.Conns, r.TargetRate}
}

// tlsTable pairs every run of a series "S+tls" with the same point of
// series "S": the last such run before it in the report, else the first
// after.
func tlsTable(rep *result.Report) *table {
	t := newTable("series", "vs", "mix", "consistency", ">value", ">clients", ">ops/s", ">ops/s TLS", ">ops/s ×",
		">p50", ">p50 TLS", ">p50 ×", ">p99", ">p99 TLS", ">srv CPU µs/op", ">srv CPU TLS", ">CPU ×")
	for i := range rep.Runs {
		r := &rep.Runs[i]
		base, ok := strings.CutSuffix(r.Series, TLSSuffix)
		if !ok {
			continue
		}
		b := plainTwin(rep, i, base)
		if b == nil {
			continue
		}
		cpuB, cpuT, cpuX := "–", "–", "–"
		if b.ServerPIDs > 0 && r.ServerPIDs > 0 {
			cpuB, cpuT, cpuX = cpu(b.ServerCPUPerOp), cpu(r.ServerCPUPerOp), ratio(r.ServerCPUPerOp, b.ServerCPUPerOp)
		}
		t.add(r.Series, b.Series, r.Mix, consistency(r), bytes(r.ValueSize), load(r),
			rate(b.Throughput), rate(r.Throughput), ratio(r.Throughput, b.Throughput),
			us(b.Lat.P50), us(r.Lat.P50), ratio(r.Lat.P50, b.Lat.P50),
			us(b.Lat.P99), us(r.Lat.P99), cpuB, cpuT, cpuX)
	}
	return t
}

func plainTwin(rep *result.Report, i int, series string) *result.Run {
	k := keyOf(&rep.Runs[i])
	before, after := -1, -1
	for j := range rep.Runs {
		r := &rep.Runs[j]
		if r.Series != series || keyOf(r) != k {
			continue
		}
		if j < i {
			before = j
		} else if after < 0 {
			after = j
		}
	}
	switch {
	case before >= 0:
		return &rep.Runs[before]
	case after >= 0:
		return &rep.Runs[after]
	}
	return nil
}

// ratio is a/b as "1.23×", or "–" without both.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
