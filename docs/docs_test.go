package docs

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/ratelog"
	"github.com/kvd-project/kvd/internal/redisapi"
	"github.com/kvd-project/kvd/internal/resp"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/watch"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/raft/peer"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/rdma"
	"github.com/kvd-project/kvd/transport/tcp"
)

func seconds(d time.Duration) float64 { return d.Seconds() }

// exported are the limits the code exports (or a flag's default that an
// exported constant holds), by the name docs/limits.md gives them.
var exported = map[string]float64{
	"client.MaxKey":                         client.MaxKey,
	"client.MaxValue":                       client.MaxValue,
	"--table-mem":                           server.DefaultTableMem,
	"table.MaxArea":                         table.MaxArea,
	"table.MaxBuckets":                      table.MaxBuckets,
	"table.SlotsPerBucket":                  table.SlotsPerBucket,
	"table.KeyCapacity":                     float64(table.KeyCapacity(1024)) / (1024 * table.SlotsPerBucket),
	"table.MaxInline":                       table.MaxInline,
	"table.MinInline":                       table.MinInline,
	"--reuse-grace":                         seconds(server.DefaultReuseGrace),
	"--table-inline-grace":                  seconds(table.DefaultInlineGrace),
	"--table-inline":                        server.DefaultTableInline,
	"client.MaxTxnCompares":                 client.MaxTxnCompares,
	"client.MaxTxnOps":                      client.MaxTxnOps,
	"client.MaxTxnBytes":                    client.MaxTxnBytes,
	"client.MaxTxnReadBytes":                client.MaxTxnReadBytes,
	"client.MaxTxnResponseBytes":            client.MaxTxnResponseBytes,
	"client.MaxBatchPuts":                   client.MaxBatchPuts,
	"client.MaxBatchBytes":                  client.MaxBatchBytes,
	"client.MaxGetMany":                     client.MaxGetMany,
	"transport.MaxBatch":                    transport.MaxBatch,
	"transport.MaxReadBatchBytes":           transport.MaxReadBatchBytes,
	"client.MaxAtomicBytes":                 client.MaxAtomicBytes,
	"client.MaxScanPageKeys":                client.MaxScanPageKeys,
	"client.MaxScanPageBytes":               client.MaxScanPageBytes,
	"client.MaxSortKeys":                    client.MaxSortKeys,
	"client.MaxSortBytes":                   client.MaxSortBytes,
	"kv.MaxLeases":                          kv.MaxLeases,
	"kv.MaxLeaseKeys":                       kv.MaxLeaseKeys,
	"client.MaxLeaseListIDs":                client.MaxLeaseListIDs,
	"kv.MinLeaseTTL":                        seconds(kv.MinLeaseTTL),
	"kv.MaxLeaseTTL":                        seconds(kv.MaxLeaseTTL),
	"--watch-history-events":                watch.DefaultHistoryEvents,
	"--watch-history-bytes":                 watch.DefaultHistoryBytes,
	"wire.MaxWatchBytes":                    wire.MaxWatchBytes,
	"--max-watches":                         watch.DefaultMaxWatchers,
	"--max-watches-per-conn":                server.DefaultMaxWatchesPerConn,
	"wire.MaxWatchEvents":                   wire.MaxWatchEvents,
	"server.MaxSnapshotStreams":             server.MaxSnapshotStreams,
	"server.MaxHashKV":                      server.MaxHashKV,
	"wire.MaxSnapshotChunk":                 wire.MaxSnapshotChunk,
	"--max-connections":                     server.DefaultMaxConnections,
	"tcp.DefaultHandshakeTimeout":           seconds(tcp.DefaultHandshakeTimeout),
	"tcp.DefaultIdleTimeout":                seconds(tcp.DefaultIdleTimeout),
	"tcp.DefaultReadTimeout":                seconds(tcp.DefaultReadTimeout),
	"tcp.DefaultWriteTimeout":               seconds(tcp.DefaultWriteTimeout),
	"tcp.DefaultQueueBytes":                 tcp.DefaultQueueBytes,
	"ratelog.DefaultEvery":                  seconds(ratelog.DefaultEvery),
	"rdma.AuthMaxMessage":                   rdma.AuthMaxMessage,
	"rdma.DefaultAuthTimeout":               seconds(rdma.DefaultAuthTimeout),
	"rdma.MinKeyBytes":                      rdma.MinKeyBytes,
	"rdma.MaxKeyBytes":                      rdma.MaxKeyBytes,
	"rdma.MaxKeyFileBytes":                  rdma.MaxKeyFileBytes,
	"--rdma-ack-timeout":                    seconds(rdma.DefaultAckTimeout),
	"rdma.DefaultRetryCount":                rdma.DefaultRetryCount,
	"--rdma-spin":                           seconds(rdma.DefaultSpinPoll),
	"raft.DefaultSnapshotChunkSize":         raft.DefaultSnapshotChunkSize,
	"peer.DefaultSnapshotFrameTimeout":      seconds(peer.DefaultSnapshotFrameTimeout),
	"peer.MaxIndex":                         float64(peer.MaxIndex),
	"peer.MaxTerm":                          float64(peer.MaxTerm),
	"--tick":                                seconds(server.DefaultTickInterval),
	"raft.DefaultElectionTicks":             raft.DefaultElectionTicks,
	"--snapshot-count":                      server.DefaultSnapshotCount,
	"--lease-drift":                         raft.DefaultLeaseDrift,
	"limits.MaxDeleteRangeKeys":             limits.MaxDeleteRangeKeys,
	"limits.MaxDeleteRangePrevBytes":        limits.MaxDeleteRangePrevBytes,
	"--watch-progress-notify-interval":      seconds(server.DefaultWatchProgressNotifyInterval),
	"server.MinWatchProgressNotifyInterval": seconds(server.MinWatchProgressNotifyInterval),
	"--redis-max-conns":                     redisapi.DefaultMaxConns,
	"--redis-idle-timeout":                  seconds(redisapi.DefaultIdleTimeout),
	"redisapi.DefaultReplyTimeout":          seconds(redisapi.DefaultReplyTimeout),
	"--redis-max-pipeline":                  redisapi.DefaultMaxPipeline,
	"--redis-max-args":                      resp.DefaultMaxArgs,
	"--redis-max-inline":                    resp.DefaultMaxInline,
	"resp.MaxBulk":                          resp.MaxBulk,
	"resp.DefaultMaxRequestBytes":           resp.DefaultMaxRequestBytes,
	"redisapi.DefaultCommandTimeout":        seconds(redisapi.DefaultCommandTimeout),
	"redisapi.DefaultMaxScanCursors":        redisapi.DefaultMaxScanCursors,
}

// unexported are limits the code keeps to a package: the doc's name, and
// the directory whose source declares it (a const, or a var's initial
// value), read by constValue.
var unexported = map[string]string{
	"redisapi.maxQueued":             "internal/redisapi",
	"redisapi.maxBatch":              "internal/redisapi",
	"server.minTableMem":             "server",
	"table.searchLimit":              "internal/table",
	"client.batchKeys":               "client",
	"client.clockMaxAge":             "client",
	"client.watchQueueBytes":         "client",
	"client.defaultRequestTimeout":   "client",
	"server.minSnapshotChunk":        "server",
	"server.replyTimeout":            "server",
	"server.requestTimeout":          "server",
	"server.maxInflightPerConn":      "server",
	"server.maxConnBytes":            "server",
	"kvd.maxHTTPConns":               "cmd/kvd",
	"server.maxSnapshotPerTableByte": "server",
	"server.minMaxSnapshotBytes":     "server",
	"limits.CompactBatch":            "internal/limits",
	"raft.maxClusterToken":           "raft",
}

// TestLimitsMatchCode checks every row of docs/limits.md's tables ("| limit
// | value | `name` |") against the code, and that the page states no
// number outside them.
func TestLimitsMatchCode(t *testing.T) {
	b, err := os.ReadFile("limits.md")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for i, line := range strings.Split(string(b), "\n") {
		where := "limits.md:" + strconv.Itoa(i+1)
		if !strings.HasPrefix(line, "|") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			if m := regexp.MustCompile(`[0-9]`).FindString(line); m != "" {
				t.Errorf("%s: a number outside the tables, which the test cannot check: %q", where, line)
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Errorf("%s: want 3 cells (limit, value, defined by): %q", where, line)
			continue
		}
		value, name := strings.TrimSpace(cells[1]), strings.Trim(strings.TrimSpace(cells[2]), "`")
		if value == "value" || strings.HasPrefix(value, "---") {
			continue
		}
		used[name] = true
		want, ok := exported[name]
		if !ok {
			dir, ok := unexported[name]
			if !ok {
				t.Errorf("%s: %s is unknown to the test: add it to exported or unexported", where, name)
				continue
			}
			want = constValue(t, dir, name[strings.Index(name, ".")+1:])
		}
		got, tol, err := parseValue(value)
		if err != nil {
			t.Errorf("%s: value %q: %v", where, value, err)
			continue
		}
		if math.Abs(got-want) > tol {
			t.Errorf("%s: the doc says %s = %q (%g), the code has %g", where, name, value, got, want)
		}
	}
	for _, m := range []map[string]float64{exported} {
		for name := range m {
			if !used[name] {
				t.Errorf("limits.md has no row for %s", name)
			}
		}
	}
	for name := range unexported {
		if !used[name] {
			t.Errorf("limits.md has no row for %s", name)
		}
	}
}

var units = map[string]float64{
	"": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	"µs": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "days": 24 * 3600,
}

// parseValue reads a doc value: terms "N [unit]" joined by " + ", where N
// is a decimal, 2^K or A/B. tol is half the last digit the doc wrote, so
// "67.1 ms" matches 67.108864 ms and "1 MiB" matches only 1 MiB.
func parseValue(s string) (v, tol float64, err error) {
	for _, term := range strings.Split(s, " + ") {
		num, unit, _ := strings.Cut(strings.TrimSpace(term), " ")
		mult, ok := units[unit]
		if !ok {
			return 0, 0, strconv.ErrSyntax
		}
		var x, step float64
		switch {
		case strings.Contains(num, "^"):
			base, exp, _ := strings.Cut(num, "^")
			bb, err1 := strconv.Atoi(base)
			ee, err2 := strconv.Atoi(exp)
			if err1 != nil || err2 != nil {
				return 0, 0, strconv.ErrSyntax
			}
			x = math.Pow(float64(bb), float64(ee))
		case strings.Contains(num, "/"):
			a, b, _ := strings.Cut(num, "/")
			aa, err1 := strconv.Atoi(a)
			bb, err2 := strconv.Atoi(b)
			if err1 != nil || err2 != nil || bb == 0 {
				return 0, 0, strconv.ErrSyntax
			}
			x = float64(aa) / float64(bb)
		default:
			if x, err = strconv.ParseFloat(num, 64); err != nil {
				return 0, 0, err
			}
			if _, frac, ok := strings.Cut(num, "."); ok {
				step = math.Pow(10, -float64(len(frac))) / 2
			}
		}
		v += x * mult
		tol += step * mult
	}
	return v, tol + math.Abs(v)*1e-12, nil
}

// constValue evaluates the constant (or a package-level var's initial
// value) name declared in the non-test Go files of the module directory
// dir, as a number; durations in seconds.
func constValue(t *testing.T, dir, name string) float64 {
	t.Helper()
	fset := token.NewFileSet()
	specs := map[string]ast.Expr{}
	files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						specs[n.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	e, ok := specs[name]
	if !ok {
		t.Fatalf("no constant or variable %s in %s: re-point docs_test.go at where it lives now", name, dir)
	}
	v, dur, ok := eval(specs, e)
	if !ok {
		t.Fatalf("%s in %s: cannot evaluate %T", name, dir, e)
	}
	f, _ := constant.Float64Val(constant.ToFloat(v))
	if dur {
		f /= float64(time.Second)
	}
	return f
}

var timeUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

// eval folds a constant expression of literals, operators, the package's
// own constants, time's units and the limits of exported; dur reports a
// time.Duration (in ns).
func eval(specs map[string]ast.Expr, e ast.Expr) (v constant.Value, dur, ok bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		v = constant.MakeFromLiteral(e.Value, e.Kind, 0)
		return v, false, v.Kind() != constant.Unknown
	case *ast.ParenExpr:
		return eval(specs, e.X)
	case *ast.Ident:
		if x, ok := specs[e.Name]; ok {
			return eval(specs, x)
		}
	case *ast.SelectorExpr:
		pkg, isIdent := e.X.(*ast.Ident)
		if !isIdent {
			break
		}
		if u, ok := timeUnits[e.Sel.Name]; ok && pkg.Name == "time" {
			return constant.MakeInt64(int64(u)), true, true
		}
		// Another package's limit that the test already knows.
		if x, ok := exported[pkg.Name+"."+e.Sel.Name]; ok {
			if x == math.Trunc(x) {
				return constant.MakeInt64(int64(x)), false, true
			}
			return constant.MakeFloat64(x), false, true
		}
	case *ast.BinaryExpr:
		x, dx, ok1 := eval(specs, e.X)
		y, dy, ok2 := eval(specs, e.Y)
		if !ok1 || !ok2 {
			return nil, false, false
		}
		if e.Op == token.SHL || e.Op == token.SHR {
			s, ok := constant.Uint64Val(y)
			return constant.Shift(x, e.Op, uint(s)), dx, ok
		}
		op := e.Op
		if op == token.QUO && x.Kind() == constant.Int && y.Kind() == constant.Int {
			op = token.QUO_ASSIGN // Go's integer division
		}
		return constant.BinaryOp(x, op, y), dx || dy, true
	}
	return nil, false, false
}
