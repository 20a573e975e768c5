package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// revStart, revEnd bound the revision test's key space for scans and
// range deletes.
var revStart, revEnd = []byte("r"), []byte("s")

// revKVsOf is the key space as a scan returned it; a key of the scan
// outside revKeys makes it unlike any state of the model (revKVOf: a
// lease too, as the test grants none).
func revKVsOf(kvs []client.KV) revKeySpace {
	var ks revKeySpace
	var odd string
	for _, kv := range kvs {
		if i := revKeyIndex(string(kv.Key)); i >= 0 {
			ks[i] = revKVOf(kv.Value, kv.Meta)
		} else {
			odd += fmt.Sprintf(" [unexpected key %q]", kv.Key)
		}
	}
	ks[0].Value += odd
	return ks
}

func revKVOf(value []byte, m client.Meta) revKV {
	k := revKV{Exists: true, Value: string(value), Create: m.CreateRevision, Mod: m.ModRevision, Version: m.Version}
	if m.Lease != 0 {
		k.Value += fmt.Sprintf(" [lease %d]", m.Lease)
	}
	return k
}

func revKeyIndex(k string) int {
	for i, r := range revKeys {
		if r == k {
			return i
		}
	}
	return -1
}

// revOutcome is the output of a read that failed with err: ErrCompacted
// and ErrFutureRevision are answers; any other failure of a read had no
// effect (ok false: leave it out of the history).
func revOutcome(err error) (revOutput, bool) {
	switch {
	case errors.Is(err, client.ErrCompacted):
		return revOutput{Result: "compacted"}, true
	case errors.Is(err, client.ErrFutureRevision):
		return revOutput{Result: "future"}, true
	}
	return revOutput{}, false
}

// revPace is the pause before each operation of runRevClient.
const revPace = 30 * time.Millisecond

// runRevClient issues the revision workload on revKeys until stop
// closes: PUTs, single-key and whole-space range deletes, transactions
// guarded by a key's version that PUT two keys, GETs with metadata
// (one-sided linearizable, some ReadIndex), linearizable scans of the key
// space at the latest revision and at past ones around what the client
// last saw (some compacted, some in the future), and compactions a little
// behind it. Pinned readers (readOnly) only read.
func runRevClient(h *history, id int, w workload, stop <-chan struct{}) error {
	c, err := w.newClient()
	if err != nil {
		return err
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(uint64(id), 2828))
	var seen uint64                   // the highest revision this client was told
	var versions [len(revKeys)]uint64 // each key's version as the client last saw it
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return nil
		default:
		}
		r := rng.IntN(100)
		if w.readOnly {
			r = r * 45 / 100
		}
		// The history is checked as one store, whose cost grows with
		// its length: every client paces itself.
		time.Sleep(revPace)
		ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
		in := revInput{Key: rng.IntN(len(revKeys)), Value: fmt.Sprintf("c%d-%d", id, seq)}
		call := h.now()
		out, keep := revOp(ctx, c, rng, r, &in, seen, &versions)
		cancel()
		if !keep {
			continue
		}
		if out.Result != "unknown" {
			seen = max(seen, out.Rev)
		}
		h.record(id, in, call, out, out.Result == "unknown")
	}
}

// revOp runs one operation of the workload chosen by r (0-99) and
// returns its output, and false for a failed read (no effect: left out).
func revOp(ctx context.Context, c *client.Client, rng *rand.Rand, r int, in *revInput, seen uint64, versions *[len(revKeys)]uint64) (revOutput, bool) {
	key := []byte(revKeys[in.Key])
	switch {
	case r < 25:
		return revGet(ctx, c, r >= 20, in, versions)
	case r < 32:
		in.Op = "range"
		rr, err := c.Range(ctx, revStart, revEnd)
		if err != nil {
			return revOutput{}, false
		}
		return revOutput{Result: "ok", Rev: rr.Revision, Keys: revKVsOf(rr.KVs)}, true
	case r < 45:
		if seen == 0 {
			return revOutput{}, false
		}
		// Mostly behind what the client saw, sometimes ahead of it.
		in.Op, in.Rev = "range-at", uint64(max(int64(seen)+3-int64(rng.IntN(20)), 1))
		rr, err := c.Range(ctx, revStart, revEnd, client.WithRev(in.Rev))
		if err != nil {
			return revOutcome(err)
		}
		return revOutput{Result: "ok", Rev: rr.Revision, Keys: revKVsOf(rr.KVs)}, true
	case r < 72:
		in.Op = "put"
		rev, err := c.PutRevision(ctx, key, []byte(in.Value))
		return writeOut(err, revOutput{Rev: rev}), true
	case r < 83:
		in.Op = "del"
		end := append(key, 0)
		if r >= 80 {
			in.Op, key, end = "del-all", revStart, revEnd
		}
		dr, err := c.DeleteRange(ctx, key, end)
		if err != nil {
			return writeOut(err, revOutput{}), true
		}
		return revOutput{Result: "ok", Rev: dr.Revision, Deleted: int(dr.Deleted)}, true
	case r < 95:
		return revTxn(ctx, c, rng, in, versions), true
	}
	if seen == 0 {
		return revOutput{}, false
	}
	in.Op, in.Rev = "compact", uint64(max(int64(seen)-8-int64(rng.IntN(4)), 1))
	err := c.Compact(ctx, in.Rev)
	if out, ok := revOutcome(err); ok {
		return out, true
	}
	return writeOut(err, revOutput{}), true
}

// writeOut is out with the write's result: "ok", or "unknown" if it
// failed (it may have been applied).
func writeOut(err error, out revOutput) revOutput {
	out.Result = "ok"
	if err != nil {
		out = revOutput{Result: "unknown"}
	}
	return out
}

// revGet GETs in.Key with its metadata: one-sided linearizable (or its
// RPC fallback), or with readIndex by ReadIndex RPC.
func revGet(ctx context.Context, c *client.Client, readIndex bool, in *revInput, versions *[len(revKeys)]uint64) (revOutput, bool) {
	in.Op = "get"
	level, via := client.Linearizable, "one-sided"
	if readIndex {
		level, via = client.ReadIndex, "readindex"
	}
	rpcs := c.Stats().RPCGets
	v, m, rev, err := c.GetMeta(ctx, []byte(revKeys[in.Key]), client.WithConsistency(level))
	if level == client.Linearizable && c.Stats().RPCGets != rpcs {
		via = "rpc" // fell back
	}
	out := revOutput{Result: "ok", Rev: rev, Partial: via != "one-sided", Via: via}
	switch {
	case err == nil:
		out.Keys[in.Key] = revKVOf(v, m)
	case !errors.Is(err, client.ErrNotFound):
		return revOutput{}, false
	}
	versions[in.Key] = out.Keys[in.Key].Version
	return out, true
}

// revTxn runs a transaction: if in.Key's version is the one the client
// last saw (sometimes one off), PUT in.Value to two keys, else GET every
// key.
func revTxn(ctx context.Context, c *client.Client, rng *rand.Rand, in *revInput, versions *[len(revKeys)]uint64) revOutput {
	perm := rng.Perm(len(revKeys))
	in.Op, in.Puts, in.Expect = "txn", [2]int{perm[0], perm[1]}, versions[in.Key]
	if rng.IntN(5) == 0 {
		in.Expect++
	}
	var get []client.Op
	for _, k := range revKeys {
		get = append(get, client.OpGet([]byte(k)))
	}
	res, err := c.Txn(ctx, client.Txn{
		If: []client.Cmp{client.CompareVersion([]byte(revKeys[in.Key]), client.CmpEqual, in.Expect)},
		Then: []client.Op{
			client.OpPut([]byte(revKeys[in.Puts[0]]), []byte(in.Value)),
			client.OpPut([]byte(revKeys[in.Puts[1]]), []byte(in.Value)),
		},
		Else: get,
	})
	if err != nil {
		return revOutput{Result: "unknown"}
	}
	out := revOutput{Result: "ok", Rev: res.Revision}
	if !res.Succeeded {
		out.Result = "else"
		for i, g := range res.Results {
			if g.Found {
				out.Keys[i] = revKVOf(g.Value, g.Meta)
			}
			versions[i] = out.Keys[i].Version
		}
		return out
	}
	for j, p := range in.Puts {
		out.Keys[p] = revKVOf([]byte(in.Value), res.Results[j].Meta)
		versions[p] = out.Keys[p].Version
	}
	return out
}

// revisionHistory reads the key space's state on pc (the model's initial
// state) and then runs historyOn with runRevClient.
func revisionHistory(t *testing.T, pc *kvdtest.ProcCluster, base workload, faults []fault) (revState, []porcupine.Operation) {
	t.Helper()
	w := base
	w.eps = pc.Endpoints()
	c, err := w.newClient()
	if err != nil {
		t.Fatal(err)
	}
	rr, err := c.Range(ctxFor(10*time.Second), revStart, revEnd)
	c.Close()
	if err != nil {
		t.Fatalf("reading the start revision: %v", err)
	}
	initial := revState{Head: &revNode{Rev: rr.Revision, Keys: revKVsOf(rr.KVs)}}
	base.writers, base.need = revWriters, revCensus
	return initial, historyOn(t, pc, base, runRevClient, faults)
}

// TestRevisionsLinearizableUnderFaults: concurrent clients PUT, delete
// (one key, or the key space by one range delete), run transactions
// guarded by a key's version, GET with metadata (one-sided and by
// ReadIndex), scan the key space at the latest revision and at past ones,
// and compact the history, while the leader is killed, partitioned away
// and frozen (casFaults). porcupine checks the history against one store
// with revisions (revModel): every write's revision is the next one
// exactly when it changes something, every key's create and mod revision
// and version are the store's, a read at a past revision shows that
// revision or fails with ErrCompacted only below the compaction, and
// compactions move forward only.
func TestRevisionsLinearizableUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the fault test in -short mode")
	}
	pc := startCluster(t)
	initial, ops := revisionHistory(t, pc, workload{keys: len(revKeys), timeout: opTimeout}, casFaults(t, pc))
	checkRevisionHistory(t, initial, ops)
}

// revWriters is how many clients write in the revision fault test. Each
// write a fault leaves unknown may have taken effect at any point after
// its call, and the model is the whole store's, so the search grows
// steeply with their number: with four writers a history held 7 to 11 of
// them, and porcupine did not always finish within revCheckBudget.
const revWriters = 2

// revCheckBudget bounds porcupine's search of a revision history. The
// model is the whole store's (revisions are), so it cannot be split key by
// key, and each write left unknown by a fault may have taken effect at any
// point after it was called: the search over a few such writes took from
// seconds to nearly three minutes for histories of the same shape.
const revCheckBudget = 8 * time.Minute

// revCensus sorts runRevClient's operations by kind and result.
var revCensus = census{
	kind: func(op porcupine.Operation) string {
		in, out := op.Input.(revInput), op.Output.(revOutput)
		switch {
		case in.Op == "get":
			return "get " + out.Via
		case in.Op == "del" && out.Result == "ok":
			return fmt.Sprintf("del deleted=%v", out.Deleted > 0)
		}
		return in.Op + " " + out.Result
	},
	required: []string{"put ok", "del deleted=true", "del-all ok", "txn ok", "txn else", "get one-sided",
		"get readindex", "range ok", "range-at ok", "range-at compacted", "compact ok"},
}

// checkRevisionHistory checks a history of runRevClient: enough of each
// kind of operation, and linearizable.
func checkRevisionHistory(t *testing.T, initial revState, ops []porcupine.Operation) {
	t.Helper()
	revCensus.require(t, ops)
	checkLinearizable(t, revModel(initial), ops, "kvd-revision-linearizability", revCheckBudget)
}
