package result

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kvd-project/kvd/bench/latency"
)

// column is one CSV column of a T. Derived columns have no set and are
// ignored when reading.
type column[T any] struct {
	name string
	get  func(*T) string
	set  func(*T, string) error
}

func fmtF(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func strCol[T any](name string, f func(*T) *string) column[T] {
	return column[T]{name, func(t *T) string { return *f(t) }, func(t *T, s string) error { *f(t) = s; return nil }}
}

func intCol[T any](name string, f func(*T) *int) column[T] {
	return column[T]{name, func(t *T) string { return strconv.Itoa(*f(t)) }, func(t *T, s string) (err error) {
		*f(t), err = strconv.Atoi(s)
		return err
	}}
}

func i64Col[T any](name string, f func(*T) *int64) column[T] {
	return column[T]{name, func(t *T) string { return strconv.FormatInt(*f(t), 10) }, func(t *T, s string) (err error) {
		*f(t), err = strconv.ParseInt(s, 10, 64)
		return err
	}}
}

func u64Col[T any](name string, f func(*T) *uint64) column[T] {
	return column[T]{name, func(t *T) string { return strconv.FormatUint(*f(t), 10) }, func(t *T, s string) (err error) {
		*f(t), err = strconv.ParseUint(s, 10, 64)
		return err
	}}
}

func f64Col[T any](name string, f func(*T) *float64) column[T] {
	return column[T]{name, func(t *T) string { return fmtF(*f(t)) }, func(t *T, s string) (err error) {
		*f(t), err = strconv.ParseFloat(s, 64)
		return err
	}}
}

func derived[T any](name string, f func(*T) string) column[T] { return column[T]{name: name, get: f} }

func summaryCols[T any](prefix string, f func(*T) *latency.Summary) []column[T] {
	return []column[T]{
		i64Col(prefix+"count", func(t *T) *int64 { return &f(t).Count }),
		f64Col(prefix+"mean_us", func(t *T) *float64 { return &f(t).Mean }),
		f64Col(prefix+"min_us", func(t *T) *float64 { return &f(t).Min }),
		f64Col(prefix+"p50_us", func(t *T) *float64 { return &f(t).P50 }),
		f64Col(prefix+"p90_us", func(t *T) *float64 { return &f(t).P90 }),
		f64Col(prefix+"p99_us", func(t *T) *float64 { return &f(t).P99 }),
		f64Col(prefix+"p999_us", func(t *T) *float64 { return &f(t).P999 }),
		f64Col(prefix+"max_us", func(t *T) *float64 { return &f(t).Max }),
	}
}

// retryReasons encodes a map as "a=1;b=2" in key order, leaving out zeros.
func fmtReasons(m map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != 0 {
			parts = append(parts, k+"="+strconv.FormatUint(m[k], 10))
		}
	}
	return strings.Join(parts, ";")
}

func parseReasons(s string) (map[string]uint64, error) {
	if s == "" {
		return nil, nil
	}
	m := map[string]uint64{}
	for _, p := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(p, "=")
		n, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("bad retry reason %q", p)
		}
		m[k] = n
	}
	return m, nil
}

func ratioCol(op, which string) column[Run] {
	return derived(op+"_x_base_"+which, func(r *Run) string {
		x, ok := r.RatioFor(op)
		if !ok {
			return ""
		}
		if which == "p50" {
			return fmtF(x.P50)
		}
		return fmtF(x.P99)
	})
}

var runColumns = slices.Concat([]column[Run]{
	strCol("series", func(r *Run) *string { return &r.Series }),
	strCol("transport", func(r *Run) *string { return &r.Transport }),
	strCol("mix", func(r *Run) *string { return &r.Mix }),
	intCol("read_pct", func(r *Run) *int { return &r.ReadPct }),
	strCol("consistency", func(r *Run) *string { return &r.Consistency }),
	strCol("dist", func(r *Run) *string { return &r.Dist }),
	intCol("keys", func(r *Run) *int { return &r.Keys }),
	intCol("key_size", func(r *Run) *int { return &r.KeySize }),
	intCol("value_size", func(r *Run) *int { return &r.ValueSize }),
	strCol("mode", func(r *Run) *string { return &r.Mode }),
	intCol("clients", func(r *Run) *int { return &r.Clients }),
	intCol("conns", func(r *Run) *int { return &r.Conns }),
	f64Col("target_rate", func(r *Run) *float64 { return &r.TargetRate }),
	f64Col("seconds", func(r *Run) *float64 { return &r.Seconds }),
	u64Col("ops", func(r *Run) *uint64 { return &r.Ops }),
	u64Col("gets", func(r *Run) *uint64 { return &r.Gets }),
	u64Col("puts", func(r *Run) *uint64 { return &r.Puts }),
	u64Col("errors", func(r *Run) *uint64 { return &r.Errors }),
	u64Col("misses", func(r *Run) *uint64 { return &r.Misses }),
	u64Col("conflicts", func(r *Run) *uint64 { return &r.Conflicts }),
	u64Col("scans", func(r *Run) *uint64 { return &r.Scans }),
	u64Col("scan_keys", func(r *Run) *uint64 { return &r.ScanKeys }),
	f64Col("throughput", func(r *Run) *float64 { return &r.Throughput }),
},
	summaryCols("lat_", func(r *Run) *latency.Summary { return &r.Lat }),
	summaryCols("get_", func(r *Run) *latency.Summary { return &r.GetLat }),
	summaryCols("put_", func(r *Run) *latency.Summary { return &r.PutLat }),
	[]column[Run]{
		u64Col("client_gets", func(r *Run) *uint64 { return &r.ClientGets }),
		u64Col("one_sided_gets", func(r *Run) *uint64 { return &r.OneSided }),
		u64Col("one_sided_rounds", func(r *Run) *uint64 { return &r.OneSidedRounds }),
		u64Col("one_sided_reads", func(r *Run) *uint64 { return &r.OneSidedReads }),
		u64Col("one_sided_bytes", func(r *Run) *uint64 { return &r.OneSidedBytes }),
		u64Col("rpc_gets", func(r *Run) *uint64 { return &r.RPCGets }),
		u64Col("fallbacks", func(r *Run) *uint64 { return &r.Fallbacks }),
		u64Col("retries", func(r *Run) *uint64 { return &r.Retries }),
		{"retry_reasons", func(r *Run) string { return fmtReasons(r.RetryReasons) }, func(r *Run, s string) (err error) {
			r.RetryReasons, err = parseReasons(s)
			return err
		}},
		derived("rounds_per_get", func(r *Run) string { return fmtF(r.RoundsPerGet()) }),
		derived("rounds_per_one_sided_get", func(r *Run) string { return fmtF(r.RoundsPerOneSidedGet()) }),
		derived("reads_per_one_sided_get", func(r *Run) string { return fmtF(r.ReadsPerOneSidedGet()) }),
		derived("bytes_per_one_sided_get", func(r *Run) string { return fmtF(r.BytesPerOneSidedGet()) }),
		f64Col("server_cpu_s", func(r *Run) *float64 { return &r.ServerCPU }),
		f64Col("server_cpu_us_per_op", func(r *Run) *float64 { return &r.ServerCPUPerOp }),
		f64Col("server_cpu_net_us_per_op", func(r *Run) *float64 { return &r.ServerCPUNetPerOp }),
		intCol("server_pids", func(r *Run) *int { return &r.ServerPIDs }),
		ratioCol("get", "p50"), ratioCol("get", "p99"), ratioCol("put", "p50"), ratioCol("put", "p99"),
		strCol("note", func(r *Run) *string { return &r.Note }),
	})

var baselineColumns = slices.Concat([]column[Baseline]{
	strCol("series", func(b *Baseline) *string { return &b.Series }),
	strCol("transport", func(b *Baseline) *string { return &b.Transport }),
	strCol("kind", func(b *Baseline) *string { return &b.Kind }),
	intCol("bytes", func(b *Baseline) *int { return &b.Bytes }),
	i64Col("iters", func(b *Baseline) *int64 { return &b.Iters }),
	intCol("rtt_factor", func(b *Baseline) *int { return &b.RTTFactor }),
	strCol("source", func(b *Baseline) *string { return &b.Source }),
}, summaryCols("lat_", func(b *Baseline) *latency.Summary { return &b.Lat }))

func writeCSV[T any](w io.Writer, cols []column[T], rows []T) error {
	cw := csv.NewWriter(w)
	rec := make([]string, len(cols))
	for i, c := range cols {
		rec[i] = c.name
	}
	if err := cw.Write(rec); err != nil {
		return err
	}
	for i := range rows {
		for j, c := range cols {
			rec[j] = c.get(&rows[i])
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// readCSV reads rows by header name; columns it does not know, and derived
// ones, are skipped, so files from a newer kvbench with extra columns load.
func readCSV[T any](r io.Reader, cols []column[T]) ([]T, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%w: csv header: %w", ErrFormat, err)
	}
	byName := map[string]column[T]{}
	for _, c := range cols {
		byName[c.name] = c
	}
	if _, ok := byName[header[0]]; !ok {
		return nil, fmt.Errorf("%w: csv column %q is not one of kvbench's", ErrFormat, header[0])
	}
	var out []T
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFormat, err)
		}
		var row T
		for i, v := range rec {
			c, ok := byName[header[i]]
			if !ok || c.set == nil {
				continue
			}
			if err := c.set(&row, v); err != nil {
				return nil, fmt.Errorf("%w: row %d column %s: %w", ErrFormat, len(out)+1, header[i], err)
			}
		}
		out = append(out, row)
	}
}

// WriteRunsCSV writes one row per run, with derived columns (round trips
// per GET, latency ratios; call ComputeRatios first) after the measured
// ones. Latency distributions (CDF) are only in the JSON.
func WriteRunsCSV(w io.Writer, runs []Run) error { return writeCSV(w, runColumns, runs) }

// ReadRunsCSV reads what WriteRunsCSV wrote (derived columns are skipped).
func ReadRunsCSV(r io.Reader) ([]Run, error) { return readCSV(r, runColumns) }

// WriteBaselinesCSV writes one row per baseline.
func WriteBaselinesCSV(w io.Writer, bases []Baseline) error {
	return writeCSV(w, baselineColumns, bases)
}

// ReadBaselinesCSV reads what WriteBaselinesCSV wrote.
func ReadBaselinesCSV(r io.Reader) ([]Baseline, error) { return readCSV(r, baselineColumns) }
