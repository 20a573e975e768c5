package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// casWorkload is one client of the compare-and-swap fault test: GETs (70%
// one-sided linearizable, 30% ReadIndex), plain PUTs and DELETEs, and
// conditional PUTs and DELETEs at the version the client last saw for the
// key (sometimes 0, "create", or one behind).
func runCASClient(h *history, id int, w workload, stop <-chan struct{}) error {
	c, err := w.newClient()
	if err != nil {
		return err
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(uint64(id), 77))
	seen := map[string]uint64{} // key -> last version this client saw
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return nil
		default:
		}
		in := casInput{Key: fmt.Sprintf("k%d", rng.IntN(w.keys))}
		r := rng.IntN(100)
		if w.readOnly {
			r = r * 30 / 100
		}
		expect := seen[in.Key]
		switch rng.IntN(10) {
		case 0:
			expect = 0
		case 1:
			expect = max(expect, 1) - 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
		var out casOutput
		call := h.now()
		switch {
		case r < 30:
			in.Op = "get"
			level, via := client.Linearizable, "one-sided"
			if r >= 21 {
				level, via = client.ReadIndex, "readindex"
			}
			v, ver, err := c.GetModRevision(ctx, []byte(in.Key), client.WithConsistency(level))
			switch {
			case err == nil:
				out, seen[in.Key] = casOutput{Result: "ok", Value: string(v), Version: ver, Via: via}, ver
			case errors.Is(err, client.ErrNotFound):
				out, seen[in.Key] = casOutput{Result: "notfound", Via: via}, 0
			default:
				cancel()
				continue // a failed read has no effect: leave it out
			}
		case r < 40:
			in.Op, in.Value = "put", fmt.Sprintf("c%d-%d", id, seq)
			ver, err := c.PutRevision(ctx, []byte(in.Key), []byte(in.Value))
			out = writeOutcome(err, ver, seen, in.Key)
		case r < 45:
			in.Op = "del"
			err := c.Delete(ctx, []byte(in.Key))
			out = writeOutcome(err, 0, seen, in.Key)
		case r < 88:
			in.Op, in.Value, in.Expect = "cas-put", fmt.Sprintf("c%d-%d", id, seq), expect
			ver, err := c.PutRevision(ctx, []byte(in.Key), []byte(in.Value), client.IfModRevision(expect))
			out = writeOutcome(err, ver, seen, in.Key)
		default:
			in.Op, in.Expect = "cas-del", expect
			err := c.Delete(ctx, []byte(in.Key), client.IfModRevision(expect))
			out = writeOutcome(err, 0, seen, in.Key)
		}
		cancel()
		h.record(id, in, call, out, out.Result == "unknown")
	}
}

// writeOutcome classifies a write's error, and updates what the client
// knows of the key's version.
func writeOutcome(err error, version uint64, seen map[string]uint64, key string) casOutput {
	var ce *client.ConflictError
	switch {
	case err == nil:
		seen[key] = version
		return casOutput{Result: "ok", Version: version}
	case errors.As(err, &ce):
		seen[key] = ce.ModRevision
		return casOutput{Result: "conflict", Version: ce.ModRevision}
	case errors.Is(err, client.ErrNotFound):
		seen[key] = 0
		return casOutput{Result: "notfound"}
	}
	return casOutput{Result: "unknown"}
}

// clientFunc is one client of a fault test: it records its operations in
// h until stop closes.
type clientFunc func(h *history, id int, w workload, stop <-chan struct{}) error

// historyUnderFaults starts a 3-node cluster and runs clients on it while
// casFaults run: four that use every endpoint, and three that only read,
// each pinned to one node (so that one keeps reading a frozen or isolated
// leader's region). It returns the history once every fault has run and
// settled.
func historyUnderFaults(t *testing.T, run clientFunc, need census, keys int) []porcupine.Operation {
	t.Helper()
	pc := startCluster(t)
	return historyOn(t, pc, workload{keys: keys, timeout: opTimeout, need: need}, run, casFaults(t, pc))
}

// historyOn is historyUnderFaults on the cluster pc with faults, whose
// clients are made from base (its transport, timeouts and key count).
// Once the faults have settled, the clients go on until the history holds
// enough of each kind base.need requires, for at most enoughWait: a kind
// the faults made rare is then still checked, not a coin toss.
func historyOn(t *testing.T, pc *kvdtest.ProcCluster, base workload, run clientFunc, faults []fault) []porcupine.Operation {
	t.Helper()
	h := &history{start: time.Now()}
	works := []workload{}
	for range cmp.Or(base.writers, 4) {
		w := base
		w.eps = pc.Endpoints()
		works = append(works, w)
	}
	for _, p := range pc.Procs {
		w := base
		w.eps, w.readOnly = []string{p.Addr}, true
		works = append(works, w)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(works))
	for i, w := range works {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(h, i, w, stop); err != nil {
				errs <- err
			}
		}()
	}
	time.Sleep(time.Second)
	for _, f := range faults {
		t.Logf("fault: %s", f.name)
		f.do()
		time.Sleep(f.settle)
	}
	for deadline := time.Now().Add(enoughWait); len(base.need.short(h.snapshot())) > 0 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return h.snapshot()
}

// enoughWait bounds how long historyOn runs its clients after the faults
// to gather the kinds of operation a test requires (census.required).
const enoughWait = time.Minute

// minOfKind is how many operations of each required kind a history must
// hold to check anything.
const minOfKind = 5

// census sorts a history's operations into kinds and names the kinds a
// fault test requires minOfKind of. The zero census requires nothing.
type census struct {
	kind     func(porcupine.Operation) string
	required []string
}

// counts is how many operations of ops are of each kind.
func (c census) counts(ops []porcupine.Operation) map[string]int {
	counts := map[string]int{}
	if c.kind == nil {
		return counts
	}
	for _, op := range ops {
		counts[c.kind(op)]++
	}
	return counts
}

// short is the required kinds ops holds fewer than minOfKind of.
func (c census) short(ops []porcupine.Operation) []string {
	if len(c.required) == 0 {
		return nil
	}
	counts, short := c.counts(ops), []string(nil)
	for _, k := range c.required {
		if counts[k] < minOfKind {
			short = append(short, k)
		}
	}
	return short
}

// require fails the test if ops holds fewer than minOfKind of any
// required kind, and returns the counts by kind.
func (c census) require(t *testing.T, ops []porcupine.Operation) map[string]int {
	t.Helper()
	counts := c.counts(ops)
	t.Logf("operations: %v", counts)
	for _, k := range c.short(ops) {
		t.Errorf("only %d %q in the history: it checks too little", counts[k], k)
	}
	return counts
}

// casFaults are the fault test's faults: a leader SIGKILLed and restarted,
// the leader partitioned away, the leader frozen while its region still
// answers READs.
func casFaults(t *testing.T, pc *kvdtest.ProcCluster) []fault {
	return []fault{
		killLeader(t, pc, 3*time.Second),
		isolateLeader(t, pc, "the leader", 4*time.Second),
		freezeLeader(t, pc, 6*time.Second),
	}
}

// checkBudget is how long porcupine may search a history of a per-key
// model before the check counts as inconclusive (a failure).
const checkBudget = 3 * time.Minute

// checkLinearizable runs porcupine over ops for at most budget and fails
// the test, writing a visualization, if they are not linearizable, or if
// the search did not end within budget.
func checkLinearizable(t *testing.T, model porcupine.Model, ops []porcupine.Operation, name string, budget time.Duration) {
	t.Helper()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, budget)
	t.Logf("porcupine checked %d operations in %v: %s", len(ops), time.Since(start).Round(time.Millisecond), res)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), name+".html")
		if err := porcupine.VisualizePath(model, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatal("history is not linearizable")
	default:
		t.Fatalf("linearizability check inconclusive: %s", res)
	}
}

// TestCASLinearizableUnderFaults: concurrent clients mix plain and
// conditional PUTs and DELETEs with one-sided and ReadIndex GETs of three
// keys, while the leader is killed, partitioned away and frozen
// (historyUnderFaults). porcupine checks the history against a per-key
// model in which a conditional write applies exactly when the key's
// version matches, and a conflict names the version the key really had.
func TestCASLinearizableUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the fault test in -short mode")
	}
	checkCASHistory(t, historyUnderFaults(t, runCASClient, casCensus, 3))
}

// checkCASHistory checks a history of runCASClient: enough of each kind of
// operation, and linearizable.
func checkCASHistory(t *testing.T, ops []porcupine.Operation) {
	t.Helper()
	casCensus.require(t, ops)
	checkLinearizable(t, casModel, ops, "kvd-cas-linearizability", checkBudget)
}

// casCensus sorts runCASClient's operations by kind and result.
var casCensus = census{
	kind: func(op porcupine.Operation) string {
		in, out := op.Input.(casInput), op.Output.(casOutput)
		return in.Op + " " + out.Result + out.Via
	},
	required: []string{"cas-put ok", "cas-put conflict", "cas-del ok", "cas-del conflict", "get okone-sided", "get okreadindex"},
}

// TestCASModel: the model rejects what a broken compare-and-swap would do,
// so that the fault test above can fail.
func TestCASModel(t *testing.T) {
	op := func(client int, call, ret int64, in casInput, out casOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	put := func(v string, ver uint64) casInput { return casInput{Op: "cas-put", Key: "k", Value: v, Expect: ver} }
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"create, then swap at its version", []porcupine.Operation{
			op(0, 0, 1, put("a", 0), casOutput{Result: "ok", Version: 5}),
			op(0, 2, 3, put("b", 5), casOutput{Result: "ok", Version: 7}),
			op(1, 4, 5, casInput{Op: "get", Key: "k"}, casOutput{Result: "ok", Value: "b", Version: 7}),
		}, true},
		{"two swaps from one version both succeed", []porcupine.Operation{
			op(0, 0, 1, put("a", 0), casOutput{Result: "ok", Version: 5}),
			op(0, 2, 3, put("b", 5), casOutput{Result: "ok", Version: 7}),
			op(1, 4, 5, put("c", 5), casOutput{Result: "ok", Version: 9}),
		}, false},
		{"a conflict naming the expected version", []porcupine.Operation{
			op(0, 0, 1, put("a", 0), casOutput{Result: "ok", Version: 5}),
			op(1, 2, 3, put("b", 5), casOutput{Result: "conflict", Version: 5}),
		}, false},
		{"a conflict naming a version the key never had", []porcupine.Operation{
			op(0, 0, 1, put("a", 0), casOutput{Result: "ok", Version: 5}),
			op(1, 2, 3, put("b", 4), casOutput{Result: "conflict", Version: 6}),
		}, false},
		{"a failed swap applied anyway", []porcupine.Operation{
			op(0, 0, 1, put("a", 0), casOutput{Result: "ok", Version: 5}),
			op(1, 2, 3, put("b", 4), casOutput{Result: "conflict", Version: 5}),
			op(1, 4, 5, casInput{Op: "get", Key: "k"}, casOutput{Result: "ok", Value: "b", Version: 6}),
		}, false},
		{"a maybe-applied swap, then a read shows it", []porcupine.Operation{
			op(0, 0, 1, put("a", 0), casOutput{Result: "ok", Version: 5}),
			op(1, 2, 1<<62, put("b", 5), casOutput{Result: "unknown"}),
			op(2, 4, 5, casInput{Op: "get", Key: "k"}, casOutput{Result: "ok", Value: "b", Version: 8}),
			op(2, 6, 7, put("c", 8), casOutput{Result: "ok", Version: 9}),
		}, true},
		{"a maybe-applied swap whose version was stale, then a read shows it", []porcupine.Operation{
			op(0, 0, 1, put("a", 0), casOutput{Result: "ok", Version: 5}),
			op(1, 2, 1<<62, put("b", 4), casOutput{Result: "unknown"}),
			op(2, 4, 5, casInput{Op: "get", Key: "k"}, casOutput{Result: "ok", Value: "b", Version: 8}),
		}, false},
	} {
		if got := porcupine.CheckOperations(casModel, tc.ops); got != tc.ok {
			t.Errorf("%s: linearizable %v, want %v", tc.name, got, tc.ok)
		}
	}
}

// TestKvctlConditionalExitStatus: the kvctl binary exits 1 on a conflict,
// naming the key's mod revision on stderr, and 0 when it matches.
func TestKvctlConditionalExitStatus(t *testing.T) {
	pc := startCluster(t)
	eps := strings.Join(pc.Endpoints(), ",")
	if out, err := kvctl(eps, "put", "--if-mod-revision", "0", "lock", "me"); err != nil {
		t.Fatalf("create: %v: %s", err, out)
	}
	var ee *exec.ExitError
	out, err := kvctl(eps, "put", "--if-mod-revision", "0", "lock", "you")
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, `kvctl: kvd: conflict: key "lock" exists at mod revision`) {
		t.Fatalf("conflicting put: %v, %q; want exit 1 naming the mod revision", err, out)
	}
	out, err = kvctl(eps, "del", "--if-mod-revision", "999", "lock")
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, `is at mod revision`) {
		t.Fatalf("conflicting del: %v, %q; want exit 1 naming the mod revision", err, out)
	}
	if out, err := kvctl(eps, "get", "lock"); err != nil || out != "me\n" {
		t.Fatalf("after the conflicts: %q, %v", out, err)
	}
}

// TestCensusNamesTheRequiredKindsAHistoryLacks: historyOn keeps its
// clients running while a required kind is short, and the check fails on
// one, so short must name every required kind under minOfKind and no
// other.
func TestCensusNamesTheRequiredKindsAHistoryLacks(t *testing.T) {
	c := census{kind: func(op porcupine.Operation) string { return op.Input.(string) }, required: []string{"a", "b", "c"}}
	var ops []porcupine.Operation
	for i := range minOfKind {
		ops = append(ops, porcupine.Operation{Input: "a"}, porcupine.Operation{Input: "z"})
		if i < minOfKind-1 {
			ops = append(ops, porcupine.Operation{Input: "b"})
		}
	}
	if got := c.short(ops); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("short = %q, want [b c]", got)
	}
	if got := (census{}).short(ops); got != nil {
		t.Errorf("the zero census requires %q, want nothing", got)
	}
}
