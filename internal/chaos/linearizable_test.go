package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/transport"
)

// history records operations from many goroutines.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	ok    atomic.Int64
	maybe atomic.Int64
}

func (h *history) now() int64 { return time.Since(h.start).Nanoseconds() }

func (h *history) add(clientID int, in kvInput, call int64, out kvOutput) {
	h.record(clientID, in, call, out, out.Unknown)
}

// record adds an operation of any model; unknown marks one that failed or
// timed out, which may take effect at any time after its call.
func (h *history) record(clientID int, in any, call int64, out any, unknown bool) {
	ret := h.now()
	if unknown {
		ret = 1 << 62
		h.maybe.Add(1)
	} else {
		h.ok.Add(1)
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: clientID, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

func (h *history) snapshot() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// workload is what one client of the fault test does.
type workload struct {
	eps      []string // the client's endpoints
	keys     int
	readOnly bool          // GETs only (the pinned readers)
	timeout  time.Duration // per operation
	// writers is how many clients on every endpoint historyOn runs (0:
	// 4), besides a pinned reader per node.
	writers int
	// tr is the client's transport (nil: TCP); dial its dial timeout
	// (0: 500ms).
	tr   transport.Transport
	dial time.Duration
	// need is what historyOn gathers enough of after the faults.
	need census
	// etcd maps each node's kvd address to its etcd endpoint, for clients
	// of etcd's API (runEtcdClient).
	etcd map[string]string
}

// newClient makes the workload's client (it does not own tr).
func (w workload) newClient() (*client.Client, error) {
	return client.New(client.Config{Endpoints: w.eps, Transport: w.tr, DialTimeout: cmp.Or(w.dial, 500*time.Millisecond)})
}

// opPause paces each client of the fault test: unpaced, eight clients
// make a history (tens of thousands of operations on a loaded machine)
// that porcupine cannot always check within its bound, and the test ends
// inconclusive; paced, the faults still meet operations in flight.
const opPause = 5 * time.Millisecond

// opTimeout is the fault test's per-operation timeout; its partitions last
// longer than this.
const opTimeout = 2 * time.Second

// runClient issues random operations on a small key space until stop
// closes, recording them in h, and returns the client's stats. GETs mix
// linearizable one-sided reads with ReadIndex RPCs of the same keys.
func runClient(h *history, id int, w workload, stop <-chan struct{}) (client.Stats, error) {
	c, err := w.newClient()
	if err != nil {
		return client.Stats{}, err
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(uint64(id), 42))
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return c.Stats(), nil
		case <-time.After(opPause):
		}
		in := kvInput{Key: fmt.Sprintf("k%d", rng.IntN(w.keys))}
		ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
		r := rng.IntN(100)
		if w.readOnly {
			r = r * 50 / 100 // GETs only: 70% linearizable, 30% ReadIndex
		}
		var out kvOutput
		call := h.now()
		switch {
		case r < 50:
			in.Op = "get"
			level, via := client.Linearizable, "one-sided"
			if r >= 35 {
				level, via = client.ReadIndex, "readindex"
			}
			rpcs := c.Stats().RPCGets
			v, err := c.Get(ctx, []byte(in.Key), client.WithConsistency(level))
			if level == client.Linearizable && c.Stats().RPCGets != rpcs {
				via = "rpc" // fell back
			}
			switch {
			case err == nil:
				out = kvOutput{Value: string(v), Found: true, Via: via}
			case errors.Is(err, client.ErrNotFound):
				out = kvOutput{Via: via}
			default:
				cancel()
				continue // a failed read has no effect: leave it out
			}
		case r < 90:
			in.Op, in.Value = "put", fmt.Sprintf("c%d-%d", id, seq)
			err := c.Put(ctx, []byte(in.Key), []byte(in.Value))
			out = kvOutput{Unknown: err != nil}
		default:
			in.Op = "del"
			err := c.Delete(ctx, []byte(in.Key))
			out = kvOutput{Found: err == nil, Unknown: err != nil && !errors.Is(err, client.ErrNotFound)}
		}
		cancel()
		h.add(id, in, call, out)
	}
}

// clientTransports holds the transport the test's clients must use to reach
// a cluster whose nodes do not speak TCP (*kvdtest.ProcCluster →
// transport.Transport); leaderOf, and so the faults, use it.
var clientTransports sync.Map

// leaderOf asks every running node for its status and returns the leader.
func leaderOf(t *testing.T, pc *kvdtest.ProcCluster, timeout time.Duration) *kvdtest.Proc {
	t.Helper()
	cfg := client.Config{Endpoints: pc.Endpoints(), DialTimeout: 300 * time.Millisecond}
	if tr, ok := clientTransports.Load(pc); ok {
		cfg.Transport, cfg.DialTimeout = tr.(transport.Transport), 2*time.Second
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var lead *kvdtest.Proc
	wait.Within(t, timeout, "a leader with a valid lease", func() bool {
		for _, p := range pc.Procs {
			if !p.Running() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			st, err := c.Status(ctx, p.Addr)
			cancel()
			if err == nil && st.IsLeader && st.LeaseValid {
				lead = p
				return true
			}
		}
		return false
	})
	return lead
}

func others(pc *kvdtest.ProcCluster, p *kvdtest.Proc) []*kvdtest.Proc {
	var out []*kvdtest.Proc
	for _, q := range pc.Procs {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

// isolate cuts p off from every other node, in both directions.
func isolate(t *testing.T, pc *kvdtest.ProcCluster, p *kvdtest.Proc) {
	t.Helper()
	var addrs []string
	for _, q := range others(pc, p) {
		addrs = append(addrs, q.Addr)
		if err := q.Partition(p.Addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Partition(addrs...); err != nil {
		t.Fatal(err)
	}
}

func healAll(t *testing.T, pc *kvdtest.ProcCluster) {
	t.Helper()
	for _, p := range pc.Procs {
		if p.Running() {
			if err := p.Heal(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// fault is one disruption of the fault test. During it (from its start
// until do returns) operations must go on completing, unless it takes a
// quorum away; then they must complete again within settle after it.
type fault struct {
	name     string
	noQuorum bool
	settle   time.Duration // pause after it
	do       func()
}

// killLeader SIGKILLs the leader and restarts it after d.
func killLeader(t *testing.T, pc *kvdtest.ProcCluster, d time.Duration) fault {
	return fault{name: fmt.Sprintf("SIGKILL leader, restart after %v", d), settle: 2 * time.Second, do: func() {
		l := leaderOf(t, pc, 15*time.Second)
		l.Kill()
		time.Sleep(d)
		if err := l.Start(); err != nil {
			t.Fatal(err)
		}
	}}
}

// isolateLeader partitions the leader away from the others for d, then
// heals; who names the leader in the fault's name.
func isolateLeader(t *testing.T, pc *kvdtest.ProcCluster, who string, d time.Duration) fault {
	return fault{name: fmt.Sprintf("partition %s away for %v, heal", who, d), settle: 2 * time.Second, do: func() {
		l := leaderOf(t, pc, 15*time.Second)
		isolate(t, pc, l)
		time.Sleep(d)
		healAll(t, pc)
	}}
}

// freezeLeader SIGSTOPs the leader for d; its region still answers READs.
func freezeLeader(t *testing.T, pc *kvdtest.ProcCluster, d time.Duration) fault {
	return fault{name: fmt.Sprintf("freeze the leader for %v (its region still answers READs)", d), settle: 2 * time.Second, do: func() {
		l := leaderOf(t, pc, 15*time.Second)
		if err := l.Freeze(d); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
	}}
}

// faultSpan is when a fault ran, on the history's clock.
type faultSpan struct {
	f          fault
	start, end int64
}

// TestLinearizableUnderFaults runs concurrent clients against a 3-node
// cluster while it kills the leader, kills a follower, isolates the leader
// with partitions longer than the operation timeout (twice), freezes the
// leader (its process stalls while its region still answers one-sided
// READs, as an RDMA NIC's would), and kills two nodes at once, then checks
// the history with porcupine.
//
// Five clients use every endpoint and mix PUT, DELETE, linearizable
// one-sided GETs and ReadIndex RPC GETs of the same four keys; three more
// read only, each pinned to one node (its Endpoints is that node alone),
// so that one of them keeps reading a frozen or isolated leader's region.
// A frozen leader must not serve a linearizable GET after the new leader
// has committed a newer write.
func TestLinearizableUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the fault test in -short mode")
	}
	// Arenas on: the readers' one-sided GETs of these small values take
	// the inline path (one round trip), which the fault history checks.
	pc := kvdtest.StartProcCluster(t, procBin(t), 3, "--table-inline", "144")
	leaderOf(t, pc, 20*time.Second)

	h := &history{start: time.Now()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const general, keys = 5, 4
	var works []workload
	for i := 0; i < general; i++ {
		works = append(works, workload{eps: pc.Endpoints(), keys: keys, timeout: opTimeout})
	}
	for _, p := range pc.Procs {
		works = append(works, workload{eps: []string{p.Addr}, keys: keys, readOnly: true, timeout: opTimeout})
	}
	stats := make([]client.Stats, len(works))
	errs := make(chan error, len(works))
	for i, w := range works {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := runClient(h, i, w, stop)
			stats[i] = st
			if err != nil {
				errs <- err
			}
		}()
	}

	faults := []fault{
		killLeader(t, pc, 4*time.Second),
		{name: "SIGKILL follower, restart after 2s", settle: 2 * time.Second, do: func() {
			l := leaderOf(t, pc, 15*time.Second)
			f := others(pc, l)[0]
			f.Kill()
			time.Sleep(2 * time.Second)
			if err := f.Start(); err != nil {
				t.Fatal(err)
			}
		}},
		isolateLeader(t, pc, "the leader", 5*time.Second),
		isolateLeader(t, pc, "the new leader", 5*time.Second),
		freezeLeader(t, pc, 10*time.Second),
		{name: "SIGKILL leader and a follower together, restart both after 1s", noQuorum: true, settle: 5 * time.Second, do: func() {
			l := leaderOf(t, pc, 15*time.Second)
			f := others(pc, l)[0]
			l.Kill()
			f.Kill()
			time.Sleep(time.Second)
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
			if err := f.Start(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	time.Sleep(time.Second)
	var spans []faultSpan
	for _, f := range faults {
		t.Logf("fault: %s", f.name)
		// leaderOf inside do may wait: the fault starts when do acts,
		// which is close enough to when do is called once the cluster
		// has settled.
		sp := faultSpan{f: f, start: h.now()}
		f.do()
		sp.end = h.now()
		spans = append(spans, sp)
		time.Sleep(f.settle)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	ops := h.snapshot()
	checkProgress(t, ops, spans, stats)
	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(kvModel, ops, 3*time.Minute)
	t.Logf("checked %d operations (%d completed, %d maybe-applied) across %d faults in %v: %s",
		len(ops), h.ok.Load(), h.maybe.Load(), len(faults), time.Since(checkStart).Round(time.Second), res)
	if h.ok.Load() < 100 {
		t.Errorf("only %d operations completed: the history checks too little", h.ok.Load())
	}
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), "kvd-linearizability.html")
		if err := porcupine.VisualizePath(kvModel, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatal("history is not linearizable")
	default:
		t.Fatalf("linearizability check inconclusive: %s", res)
	}
}

// checkProgress asserts that the history exercised what it is meant to:
// GETs completed both one-sided and by RPC (and the clients' stats agree
// that one-sided reads happened), and reads and writes completed during
// every fault that leaves a quorum, and after the one that does not.
func checkProgress(t *testing.T, ops []porcupine.Operation, spans []faultSpan, stats []client.Stats) {
	t.Helper()
	via := map[string]int{}
	for _, op := range ops {
		in, out := op.Input.(kvInput), op.Output.(kvOutput)
		if in.Op == "get" {
			via[out.Via]++
		}
	}
	var rounds, gets, rpcGets uint64
	for _, st := range stats {
		rounds += st.OneSidedRounds
		gets += st.Gets
		rpcGets += st.RPCGets
	}
	t.Logf("GETs completed: %d one-sided, %d linearizable by RPC fallback, %d ReadIndex; client stats: %d GETs, %d by RPC, %d one-sided round trips",
		via["one-sided"], via["rpc"], via["readindex"], gets, rpcGets, rounds)
	if via["one-sided"] < 100 || via["readindex"] < 20 {
		t.Errorf("too few GETs completed: %d one-sided, %d ReadIndex", via["one-sided"], via["readindex"])
	}
	if rounds == 0 {
		t.Error("the clients' stats show no one-sided READ round trip")
	}
	for _, sp := range spans {
		from, to := sp.start, sp.end
		if sp.f.noQuorum {
			from, to = sp.end, sp.end+sp.f.settle.Nanoseconds()
		}
		var reads, writes int
		for _, op := range ops {
			if op.Output.(kvOutput).Unknown || op.Return < from || op.Return > to {
				continue
			}
			if op.Input.(kvInput).Op == "get" {
				reads++
			} else {
				writes++
			}
		}
		when := "during"
		if sp.f.noQuorum {
			when = "after"
		}
		t.Logf("%s %q (%.1fs): %d GETs and %d writes completed", when, sp.f.name, float64(to-from)/1e9, reads, writes)
		if reads == 0 || writes == 0 {
			t.Errorf("no %s completed %s fault %q", strings.Join(missing(reads, writes), " and no "), when, sp.f.name)
		}
	}
}

func missing(reads, writes int) []string {
	var out []string
	if reads == 0 {
		out = append(out, "GET")
	}
	if writes == 0 {
		out = append(out, "write")
	}
	return out
}
