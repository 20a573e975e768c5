//go:build rdma

package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/rdma"
)

// TestRDMAFreezeLinearizable freezes the leader of a 3-node RDMA cluster
// with SIGSTOP while clients keep doing linearizable one-sided GETs and
// PUTs, and checks the whole history with porcupine.
//
// A stopped process cannot answer RPCs, but its NIC keeps answering one-sided
// READs of its registered region, so a client that only knows the frozen
// leader keeps reading whatever the region held when it froze, lease word
// included. Linearizable GETs are only safe if the client can tell, by
// itself, that what it read is no longer authoritative.
//
// The schedule makes a stale read a certain violation, not a timing
// accident: writers pause, a controller writes a baseline value to every key
// (acknowledged), the leader is frozen, a new leader is elected among the
// other two, the controller writes a new value to every key through it
// (acknowledged), and writers resume. A GET that starts after key k's new
// value was acknowledged and returns k's baseline value is illegal in every
// linearization (the baseline PUT returned before the new PUT began, and
// every value is written once). The test finds such reads itself
// (freezeStale, which generalizes this argument), cross-checks porcupine's
// verdict against them, and on a violation checks the history again without
// them, to show whether they are the whole violation. It prints
// RDMAVM-FREEZE: lines: the verdict, why the pinned clients' one-sided
// attempts were retried during the freeze (their client's Stats), the
// timeline, and samples of any stale reads.
//
// Clients (all recorded into one history; failed PUTs and DELETEs count as
// maybe-applied, failed GETs are left out, as in the other chaos tests):
//   - mixed: every endpoint, random GET/PUT/DELETE;
//   - pinned: only the first leader's endpoint, GETs only: through the freeze
//     they can only READ the frozen region;
//   - fresh: started after the election, the two survivors' endpoints,
//     random operations;
//   - ctl: the baseline and new writes.
//
// Each GET is marked one-sided if the client's own counters show a one-sided
// round trip and no RPC GET for it (each client has one goroutine).
func TestRDMAFreezeLinearizable(t *testing.T) {
	const (
		keys         = 4
		mixedClients = 3
		pinned       = 2
		freshClients = 2
		warmup       = 3 * time.Second
		holdFrozen   = 4 * time.Second // after the new values are acknowledged
		afterThaw    = 4 * time.Second
		opTimeout    = 2 * time.Second
	)
	pc := rdmaCluster(t)
	tr := freezeTransport(t)
	ctl := freezeClientOf(t, tr, pc.Endpoints())
	old := rdmaLeader(t, ctl, pc)
	var survivors []*kvdtest.Proc
	for _, p := range pc.Procs {
		if p != old {
			survivors = append(survivors, p)
		}
	}

	sc := newFaultScenario(t, keys, opTimeout)
	rec := sc.rec
	pid, thawed := 0, true // set when the leader is frozen
	sc.undo = func() {
		if !thawed {
			thawed = true
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	for i := 0; i < mixedClients; i++ {
		sc.start("mixed", i, freezeClientOf(t, tr, pc.Endpoints()), false)
	}
	for i := 0; i < pinned; i++ {
		sc.start("pinned", 10+i, freezeClientOf(t, tr, []string{old.Addr}), true)
	}
	time.Sleep(warmup)

	// Quiesce the writers, then give every key an acknowledged baseline: the
	// last value the leader applies before it freezes.
	sc.gate.Lock()
	sc.writeAll(ctl, 100, "base-")
	time.Sleep(500 * time.Millisecond) // let the pinned clients read the baseline

	pid = old.Pid()
	if pid == 0 {
		sc.gate.Unlock()
		sc.fatalf("leader %d has no process", old.ID)
	}
	retriesBefore := sc.pinnedRetries()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		sc.gate.Unlock()
		sc.fatalf("SIGSTOP leader %d (pid %d): %v", old.ID, pid, err)
	}
	freezeAt := rec.now()
	thawed = false
	t.Cleanup(sc.undo) // runs before the clients made so far close: none waits on a frozen peer
	t.Logf("SIGSTOP leader %d (pid %d) at %s", old.ID, pid, ms(freezeAt))

	// A new leader among the other two.
	var addrs []string
	for _, p := range survivors {
		addrs = append(addrs, p.Addr)
	}
	nl := freezeLeaderAmong(freezeClientOf(t, tr, addrs), survivors, 30*time.Second)
	if nl == nil {
		sc.gate.Unlock()
		sc.fatalf("no new leader among nodes %d and %d within 30s of freezing %d", survivors[0].ID, survivors[1].ID, old.ID)
	}
	electedAt := rec.now()
	t.Logf("new leader %d at %s (%s after the freeze)", nl.ID, ms(electedAt), ms(electedAt-freezeAt))
	fresh := []string{nl.Addr}
	for _, p := range survivors {
		if p != nl {
			fresh = append(fresh, p.Addr)
		}
	}
	for i := 0; i < freshClients; i++ {
		sc.start("fresh", 20+i, freezeClientOf(t, tr, fresh), false)
	}
	ctl2 := freezeClientOf(t, tr, fresh) // learns the new leader from it

	// New acknowledged values through the new leader, then writers resume.
	_, allAcked := sc.writeAll(ctl2, 101, "new-")
	sc.gate.Unlock()
	t.Logf("new values of all %d keys acknowledged at %s", keys, ms(allAcked))

	time.Sleep(holdFrozen)
	retriesFrozen := sc.pinnedRetries()
	sc.undo()
	thawAt := rec.now()
	t.Logf("SIGCONT leader %d at %s", old.ID, ms(thawAt))
	time.Sleep(afterThaw)
	sc.stopClients()
	endAt := rec.now()

	// The history, and what it says about reads of the frozen region.
	ops := rec.snapshot()
	var oneSided, oneSidedFrozen, pinnedBefore, pinnedTries, pinnedOneSided int
	hist, completed, maybe := faultHistory(ops, func(o freezeOp) {
		if o.in.Op != "get" {
			return
		}
		if o.oneSided {
			oneSided++
			if o.call >= freezeAt && o.ret <= thawAt {
				oneSidedFrozen++
			}
			if o.kind == "pinned" && o.ret < freezeAt {
				pinnedBefore++
			}
		}
		if o.kind == "pinned" && o.call >= allAcked && o.call < thawAt {
			pinnedTries++
			if o.oneSided && o.ret < thawAt {
				pinnedOneSided++
			}
		}
	})
	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(kvModel, hist, 90*time.Second)
	checkTook := time.Since(checkStart)
	stale := freezeStale(ops)
	// The lines the VM log is grepped for.
	fmt.Printf("RDMAVM-FREEZE: porcupine: %s, %d ops (%d completed, %d maybe-applied), %d one-sided reads, "+
		"%d during the freeze; frozen leader's region after the new values were acknowledged: %d GETs tried, "+
		"%d answered one-sided before the thaw; %d definitely stale reads\n",
		faultVerdict(res), len(hist), completed, maybe, oneSided, oneSidedFrozen, pinnedTries, pinnedOneSided, len(stale))
	fmt.Printf("RDMAVM-FREEZE: the pinned clients' one-sided attempts retried during the freeze, by reason: %v\n",
		retriedSince(retriesBefore, retriesFrozen))
	fmt.Printf("RDMAVM-FREEZE: timeline: freeze %s, new leader %d elected %s, new values acknowledged %s, thaw %s, end %s; porcupine took %.1fs\n",
		ms(freezeAt), nl.ID, ms(electedAt), ms(allAcked), ms(thawAt), ms(endAt), checkTook.Seconds())
	printFreezeStale(ops, stale, freezeAt, thawAt)

	// Checks that the test tested something.
	if completed < 100 {
		t.Errorf("only %d operations completed: the history checks too little", completed)
	}
	if pinnedBefore == 0 {
		t.Errorf("the pinned clients made no one-sided read before the freeze: they never READ the leader's region")
	}
	if oneSidedFrozen == 0 {
		t.Errorf("no one-sided GET completed during the freeze")
	}
	if pinnedTries == 0 {
		t.Errorf("the pinned clients tried no GET of the frozen region after the new values were acknowledged")
	}
	judgeFault(t, "RDMAVM-FREEZE", "kvd-rdma-freeze", res, info, ops, stale, func() {
		if len(stale) == 0 {
			return
		}
		// Are the stale reads the whole violation?
		var rest []porcupine.Operation
		for i, o := range ops {
			if _, bad := stale[i]; !bad && !(o.in.Op == "get" && o.failed) {
				rest = append(rest, o.op())
			}
		}
		r2 := porcupine.CheckOperationsTimeout(kvModel, rest, 60*time.Second)
		fmt.Printf("RDMAVM-FREEZE: the same history without its %d definitely stale reads: %s\n", len(stale), r2)
	})
}

// printFreezeStale prints the stale reads by phase of the freeze, with up
// to three samples each.
func printFreezeStale(ops []freezeOp, stale map[int]freezeReplaced, freezeAt, thawAt int64) {
	phase := func(o freezeOp) string {
		switch {
		case o.call < freezeAt:
			return "before the freeze"
		case o.call < thawAt:
			return "during the freeze"
		}
		return "after the thaw"
	}
	byPhase := map[string]map[string]int{}
	var phases []string
	shown := map[string]int{}
	for _, i := range slices.Sorted(maps.Keys(stale)) {
		g, w := ops[i], stale[i]
		ph := phase(g)
		if byPhase[ph] == nil {
			byPhase[ph] = map[string]int{}
			phases = append(phases, ph)
		}
		byPhase[ph][g.kind]++
		if shown[ph] < 3 {
			shown[ph]++
			why := "a value nobody wrote"
			switch {
			case w.by.in.Op == "put":
				why = fmt.Sprintf("put(%q) by %s client %d had taken effect by %s", w.by.in.Value, w.by.kind, w.by.client, ms(w.at))
			case w.by.in.Op == "del":
				why = fmt.Sprintf("a delete by %s client %d had taken effect by %s", w.by.kind, w.by.client, ms(w.at))
			}
			got := "not found"
			if g.out.Found {
				got = fmt.Sprintf("%q", g.out.Value)
			}
			fmt.Printf("RDMAVM-FREEZE: stale read %s: %s client %d get(%s) at %s..%s -> %s (one-sided %v), but %s\n",
				ph, g.kind, g.client, g.in.Key, ms(g.call), ms(g.ret), got, g.oneSided, why)
		}
	}
	for _, ph := range phases {
		fmt.Printf("RDMAVM-FREEZE: stale reads %s: %v\n", ph, byPhase[ph])
	}
}

// freezeStale finds the GETs that no linearization can explain, by a direct
// argument that needs no search (every PUT writes a unique value):
//   - a GET returned the value of an acknowledged PUT w, yet another write of
//     the key began after w returned and had surely taken effect before the
//     GET began: it was acknowledged, or another GET that returned its
//     value had returned;
//   - a GET found nothing, yet a PUT was acknowledged before it began and no
//     DELETE (acknowledged or maybe-applied) can fall between the two;
//   - a GET returned a value no PUT wrote.
//
// It maps each such GET (by index in ops) to the write that had replaced
// what it returned (none for a value nobody wrote).
func freezeStale(ops []freezeOp) map[int]freezeReplaced {
	writes := map[string][]int{} // by key
	putOf := map[string]int{}    // by key and value
	for i, o := range ops {
		if o.in.Op != "get" {
			writes[o.in.Key] = append(writes[o.in.Key], i)
			if o.in.Op == "put" {
				putOf[o.in.Key+"\x00"+o.in.Value] = i
			}
		}
	}
	// effective[w]: by when write w had surely taken effect (1<<62: unknown).
	effective := map[int]int64{}
	for _, ws := range writes {
		for _, j := range ws {
			effective[j] = 1 << 62
			if !ops[j].out.Unknown {
				effective[j] = ops[j].ret
			}
		}
	}
	for _, g := range ops {
		if g.in.Op == "get" && !g.failed && g.out.Found {
			if j, ok := putOf[g.in.Key+"\x00"+g.out.Value]; ok && g.ret < effective[j] {
				effective[j] = g.ret
			}
		}
	}
	// replacedBy[w]: the write of w's key that began after w returned and
	// took effect first, if any.
	replacedBy := map[int]int{}
	replaced := func(wi int) (int, bool) {
		if j, ok := replacedBy[wi]; ok {
			return j, j >= 0
		}
		w, best := ops[wi], -1
		for _, j := range writes[w.in.Key] {
			if j != wi && ops[j].call > w.ret && effective[j] < 1<<62 && (best < 0 || effective[j] < effective[best]) {
				best = j
			}
		}
		replacedBy[wi] = best
		return best, best >= 0
	}
	// Times compare as porcupine orders them: at equal times a call comes
	// first, so two operations that touch overlap.
	out := map[int]freezeReplaced{}
	for i, g := range ops {
		if g.in.Op != "get" || g.failed {
			continue
		}
		if g.out.Found {
			wi, ok := putOf[g.in.Key+"\x00"+g.out.Value]
			if !ok {
				out[i] = freezeReplaced{}
				continue
			}
			if ops[wi].out.Unknown {
				continue // it may have taken effect at any time after its call
			}
			if j, ok := replaced(wi); ok && effective[j] < g.call {
				out[i] = freezeReplaced{by: ops[j], at: effective[j]}
			}
			continue
		}
		// Not found: the acknowledged PUT that began last before the GET
		// began is the hardest for a DELETE to fall after.
		p := -1
		for _, j := range writes[g.in.Key] {
			if o := ops[j]; o.in.Op == "put" && !o.out.Unknown && o.ret < g.call && (p < 0 || o.call > ops[p].call) {
				p = j
			}
		}
		if p < 0 {
			continue
		}
		deleted := false
		for _, j := range writes[g.in.Key] {
			if d := ops[j]; d.in.Op == "del" && d.call <= g.ret && (d.out.Unknown || d.ret >= ops[p].call) {
				deleted = true
				break
			}
		}
		if !deleted {
			out[i] = freezeReplaced{by: ops[p], at: ops[p].ret}
		}
	}
	return out
}

// freezeReplaced is the write that had replaced what a stale GET returned,
// and by when it had surely taken effect.
type freezeReplaced struct {
	by freezeOp
	at int64
}

func countKind(ops []freezeOp, set map[int]freezeReplaced, kind string) int {
	n := 0
	for i := range set {
		if ops[i].kind == kind {
			n++
		}
	}
	return n
}

// freezeOp is one recorded operation. Times are nanoseconds since the start.
type freezeOp struct {
	kind     string
	client   int
	in       kvInput
	out      kvOutput
	call     int64
	ret      int64
	failed   bool // a GET that returned an error (not part of the history)
	oneSided bool // a GET answered by one-sided READs
}

func (o freezeOp) op() porcupine.Operation {
	ret := o.ret
	if o.out.Unknown {
		ret = 1 << 62 // may take effect at any time after its call
	}
	return porcupine.Operation{ClientId: o.client, Input: o.in, Call: o.call, Output: o.out, Return: ret}
}

type freezeRecorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []freezeOp
}

func (r *freezeRecorder) now() int64 { return time.Since(r.start).Nanoseconds() }

func (r *freezeRecorder) add(o freezeOp) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

func (r *freezeRecorder) snapshot() []freezeOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// get runs and records one GET.
func (r *freezeRecorder) get(kind string, id int, c *client.Client, key string, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	before := c.Stats()
	call := r.now()
	v, err := c.Get(ctx, []byte(key))
	ret := r.now()
	after := c.Stats()
	o := freezeOp{kind: kind, client: id, in: kvInput{Op: "get", Key: key}, call: call, ret: ret}
	switch {
	case err == nil:
		o.out = kvOutput{Value: string(v), Found: true}
	case errors.Is(err, client.ErrNotFound):
	default:
		o.failed = true
	}
	o.oneSided = !o.failed && after.RPCGets == before.RPCGets && after.OneSidedRounds > before.OneSidedRounds
	o.out.Via = "rpc"
	if o.oneSided {
		o.out.Via = "one-sided"
	}
	r.add(o)
}

// write runs and records one PUT (value != "") or DELETE; it reports whether
// it was acknowledged, and when it returned.
func (r *freezeRecorder) write(kind string, id int, c *client.Client, key, value string, timeout time.Duration) (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	o := freezeOp{kind: kind, client: id, in: kvInput{Op: "put", Key: key, Value: value}, call: r.now()}
	var err error
	if value == "" {
		o.in.Op = "del"
		err = c.Delete(ctx, []byte(key))
		o.out = kvOutput{Found: err == nil, Unknown: err != nil && !errors.Is(err, client.ErrNotFound)}
	} else {
		err = c.Put(ctx, []byte(key), []byte(value))
		o.out = kvOutput{Unknown: err != nil}
	}
	o.ret = r.now()
	r.add(o)
	return o.ret, !o.out.Unknown
}

// putAcked writes a fresh value to key (prefix, then -1, -2, ... on retries)
// until one is acknowledged, and returns it with the time it returned.
func (r *freezeRecorder) putAcked(kind string, id int, c *client.Client, key, prefix string, within time.Duration) (string, int64, bool) {
	deadline := time.Now().Add(within)
	for try := 1; time.Now().Before(deadline); try++ {
		v := fmt.Sprintf("%s-%d", prefix, try)
		if ret, ok := r.write(kind, id, c, key, v, 5*time.Second); ok {
			return v, ret, true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", 0, false
}

// run issues random operations on keys k0..k<keys-1> until stop closes:
// half GETs, else PUTs (unique values) and some DELETEs. A writer that finds
// the gate locked does a GET instead, so reads never pause.
func (r *freezeRecorder) run(kind string, id int, c *client.Client, keys int, readOnly bool, gate *sync.RWMutex, timeout time.Duration, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(id), 8))
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		key := fmt.Sprintf("k%d", rng.IntN(keys))
		op := rng.IntN(10)
		if readOnly || op < 5 || !gate.TryRLock() {
			r.get(kind, id, c, key, timeout)
			continue
		}
		value := fmt.Sprintf("c%d-%d", id, seq)
		if op == 9 {
			value = "" // delete
		}
		r.write(kind, id, c, key, value, timeout)
		gate.RUnlock()
	}
}

// freezeTransport is one RDMA transport shared by the test's clients; it is
// closed after them.
func freezeTransport(t *testing.T) transport.Transport {
	t.Helper()
	rdmaHost(t)
	tr, err := rdma.New(rdma.Config{Device: os.Getenv("KVD_RDMA_DEVICE")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func freezeClientOf(t *testing.T, tr transport.Transport, eps []string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: eps, Transport: tr, Consistency: client.Linearizable, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// freezeLeaderAmong polls procs (never the frozen node: it cannot answer)
// until one reports itself leader with a valid lease.
func freezeLeaderAmong(c *client.Client, procs []*kvdtest.Proc, within time.Duration) *kvdtest.Proc {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, p := range procs {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := c.Status(ctx, p.Addr)
			cancel()
			if err == nil && st.IsLeader && st.LeaseValid {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func ms(ns int64) string { return fmt.Sprintf("+%.3fs", float64(ns)/1e9) }
