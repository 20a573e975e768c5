package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// etcdKV is one key as etcd's API shows it, in the model's terms (a
// lease, which the test grants none of, makes it unlike any state).
func etcdKV(kv *mvccpb.KeyValue) revKV {
	if kv == nil {
		return revKV{}
	}
	k := revKV{Exists: true, Value: string(kv.Value), Create: uint64(kv.CreateRevision), Mod: uint64(kv.ModRevision), Version: uint64(kv.Version)}
	if kv.Lease != 0 {
		k.Value += fmt.Sprintf(" [lease %d]", kv.Lease)
	}
	return k
}

// etcdKeySpace is the key space as a Range or prev_kvs showed it; a key
// outside revKeys makes it unlike any state of the model.
func etcdKeySpace(kvs []*mvccpb.KeyValue) revKeySpace {
	var ks revKeySpace
	var odd string
	for _, kv := range kvs {
		if i := revKeyIndex(string(kv.Key)); i >= 0 {
			ks[i] = etcdKV(kv)
		} else {
			odd += fmt.Sprintf(" [unexpected key %q]", kv.Key)
		}
	}
	ks[0].Value += odd
	return ks
}

// etcdReadOutcome is the output of a read that failed with err:
// ErrCompacted and ErrFutureRev are answers; any other failure of a read
// had no effect (false: leave it out of the history).
func etcdReadOutcome(err error) (etcdOutput, bool) {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return etcdOutput{Result: "compacted"}, true
	case errors.Is(err, rpctypes.ErrFutureRev):
		return etcdOutput{Result: "future"}, true
	}
	return etcdOutput{}, false
}

// etcdClient is one clientv3 client of the etcd history and what it
// knows: the first and highest header revisions it was told, and each
// key's mod revision as it last saw it (the compares of its
// transactions).
type etcdClient struct {
	c           *clientv3.Client
	rng         *rand.Rand
	first, seen uint64
	mods        [len(revKeys)]uint64
}

// runEtcdClient issues the etcd workload through clientv3 on w's nodes'
// etcd endpoints until stop closes: Puts with prev_kv, deletes of one key
// or the key space with prev_kvs, transactions that Put two keys if a
// key's mod_revision is the one the client last saw (etcd's
// optimistic-concurrency pattern) and Range the key space otherwise,
// linearizable and a few serializable Gets, Ranges of the key space at
// the latest revision and at past ones (some compacted), and compactions
// a little behind what the client saw. Pinned readers (readOnly) only
// read.
func runEtcdClient(h *history, id int, w workload, stop <-chan struct{}) error {
	var eps []string
	for _, ep := range w.eps {
		eps = append(eps, w.etcd[ep])
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: cmp.Or(w.dial, time.Second), Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	ec := &etcdClient{c: c, rng: rand.New(rand.NewPCG(uint64(id), 2929))}
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return nil
		case <-time.After(revPace): // the store's history is checked whole: pace
		}
		r := ec.rng.IntN(100)
		if w.readOnly {
			r = r * 42 / 100
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
		in := etcdInput{Key: ec.rng.IntN(len(revKeys)), Value: fmt.Sprintf("c%d-%d", id, seq)}
		call := h.now()
		out, keep := ec.op(ctx, r, &in)
		cancel()
		if !keep {
			continue
		}
		if out.Rev != 0 && out.Result != "unknown" {
			ec.seen = max(ec.seen, out.Rev)
			ec.first = cmp.Or(ec.first, out.Rev)
		}
		h.record(id, in, call, out, out.Result == "unknown")
	}
}

// op runs the operation r (0-99) picks, and returns its output, and false
// for a failed read (no effect: left out).
func (ec *etcdClient) op(ctx context.Context, r int, in *etcdInput) (etcdOutput, bool) {
	key := revKeys[in.Key]
	switch {
	case r < 22:
		in.Op = "get"
		var opts []clientv3.OpOption
		if r >= 18 {
			in.Op, opts = "sget", []clientv3.OpOption{clientv3.WithSerializable()}
		}
		resp, err := ec.c.Get(ctx, key, opts...)
		if err != nil {
			return etcdOutput{}, false
		}
		out := etcdOutput{Result: "ok", Rev: uint64(resp.Header.Revision)}
		if len(resp.Kvs) > 0 {
			out.Keys[in.Key] = etcdKV(resp.Kvs[0])
		}
		ec.mods[in.Key] = out.Keys[in.Key].Mod
		return out, true
	case r < 42:
		return ec.rangeOp(ctx, r >= 29, in)
	case r < 66:
		in.Op = "put"
		resp, err := ec.c.Put(ctx, key, in.Value, clientv3.WithPrevKV())
		if err != nil {
			return etcdOutput{Result: "unknown"}, true
		}
		out := etcdOutput{Result: "ok", Rev: uint64(resp.Header.Revision)}
		out.Keys[in.Key] = etcdKV(resp.PrevKv)
		ec.mods[in.Key] = out.Rev
		return out, true
	case r < 77:
		return ec.deleteOp(ctx, r >= 74, in), true
	case r < 95:
		return ec.txnOp(ctx, in), true
	}
	return ec.compactOp(ctx, in)
}

// rangeOp Ranges the key space: at the latest revision, or (past) at one
// mostly behind what the client saw, sometimes ahead of it, never before
// the first it saw (the history's start).
func (ec *etcdClient) rangeOp(ctx context.Context, past bool, in *etcdInput) (etcdOutput, bool) {
	in.Op = "range"
	opts := []clientv3.OpOption{clientv3.WithRange(string(revEnd))}
	if past {
		if ec.seen == 0 {
			return etcdOutput{}, false
		}
		in.Op, in.Rev = "range-at", uint64(max(int64(ec.seen)+3-int64(ec.rng.IntN(20)), int64(ec.first), 2))
		opts = append(opts, clientv3.WithRev(int64(in.Rev)))
	}
	resp, err := ec.c.Get(ctx, string(revStart), opts...)
	if err != nil {
		return etcdReadOutcome(err)
	}
	out := etcdOutput{Result: "ok", Rev: uint64(resp.Header.Revision), Keys: etcdKeySpace(resp.Kvs)}
	if !past {
		for i, k := range out.Keys {
			ec.mods[i] = k.Mod
		}
	}
	return out, true
}

// deleteOp deletes in.Key, or (all) the key space, with prev_kvs.
func (ec *etcdClient) deleteOp(ctx context.Context, all bool, in *etcdInput) etcdOutput {
	in.Op = "del"
	key, opts := revKeys[in.Key], []clientv3.OpOption{clientv3.WithPrevKV()}
	if all {
		in.Op, key = "del-all", string(revStart)
		opts = append(opts, clientv3.WithRange(string(revEnd)))
	}
	resp, err := ec.c.Delete(ctx, key, opts...)
	if err != nil {
		return etcdOutput{Result: "unknown"}
	}
	for _, kv := range resp.PrevKvs {
		if i := revKeyIndex(string(kv.Key)); i >= 0 {
			ec.mods[i] = 0
		}
	}
	return etcdOutput{Result: "ok", Rev: uint64(resp.Header.Revision), Deleted: int(resp.Deleted), Keys: etcdKeySpace(resp.PrevKvs)}
}

// txnOp: if in.Key's mod_revision is the one the client last saw
// (sometimes one off, or 0: "absent"), Put in.Value to two keys with
// prev_kv, else Range the key space.
func (ec *etcdClient) txnOp(ctx context.Context, in *etcdInput) etcdOutput {
	perm := ec.rng.Perm(len(revKeys))
	in.Op, in.Puts, in.Expect = "txn", [2]int{perm[0], perm[1]}, ec.mods[in.Key]
	switch ec.rng.IntN(8) {
	case 0:
		in.Expect++
	case 1:
		in.Expect = 0
	}
	resp, err := ec.c.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(revKeys[in.Key]), "=", int64(in.Expect))).
		Then(clientv3.OpPut(revKeys[in.Puts[0]], in.Value, clientv3.WithPrevKV()), clientv3.OpPut(revKeys[in.Puts[1]], in.Value, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(string(revStart), clientv3.WithRange(string(revEnd)))).
		Commit()
	if err != nil {
		return etcdOutput{Result: "unknown"}
	}
	out := etcdOutput{Result: "ok", Rev: uint64(resp.Header.Revision)}
	if resp.Succeeded {
		for j, p := range in.Puts {
			ec.mods[p] = out.Rev
			if j < len(resp.Responses) && resp.Responses[j].GetResponsePut() != nil {
				out.Keys[p] = etcdKV(resp.Responses[j].GetResponsePut().PrevKv)
			} else {
				out.Keys[p].Value += " [no put response]"
			}
		}
		return out
	}
	out.Result = "else"
	if len(resp.Responses) == 1 && resp.Responses[0].GetResponseRange() != nil {
		out.Keys = etcdKeySpace(resp.Responses[0].GetResponseRange().Kvs)
	} else {
		out.Keys[0].Value += fmt.Sprintf(" [else answered %d responses]", len(resp.Responses))
	}
	for i, k := range out.Keys {
		ec.mods[i] = k.Mod
	}
	return out
}

// compactOp compacts a little behind what the client saw.
func (ec *etcdClient) compactOp(ctx context.Context, in *etcdInput) (etcdOutput, bool) {
	if ec.seen == 0 {
		return etcdOutput{}, false
	}
	in.Op, in.Rev = "compact", uint64(max(int64(ec.seen)-8-int64(ec.rng.IntN(4)), 2))
	resp, err := ec.c.Compact(ctx, int64(in.Rev))
	if err == nil {
		return etcdOutput{Result: "ok", Rev: uint64(resp.Header.Revision)}, true
	}
	if out, ok := etcdReadOutcome(err); ok {
		return out, true
	}
	return etcdOutput{Result: "unknown"}, true
}

// etcdCluster is a 3-node kvd process cluster whose nodes also serve
// etcd's API (--listen-client-urls), and each node's etcd endpoint by its
// kvd address.
func etcdCluster(t *testing.T) (*kvdtest.ProcCluster, map[string]string) {
	t.Helper()
	urls := kvdtest.FreeAddrs(t, 3)
	pc := kvdtest.StartProcClusterOpts(t, procBin(t), 3, kvdtest.ProcOptions{
		PerNode: func(id uint64) []string { return []string{"--listen-client-urls", "http://" + urls[id-1]} },
	})
	leaderOf(t, pc, 20*time.Second)
	etcd := map[string]string{}
	for i, p := range pc.Procs {
		etcd[p.Addr] = urls[i]
		c := etcdClientOf(t, urls[i])
		wait.NoError(t, "a linearizable Get through "+urls[i], func() error {
			_, err := c.Get(ctxFor(2*time.Second), "probe")
			return err
		})
	}
	return pc, etcd
}

// etcdClientOf is a clientv3 client of endpoints, closed when the test
// ends.
func etcdClientOf(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// etcdKeySpaceNow is the key space and the store revision as a
// linearizable Range through etcd's API shows them.
func etcdKeySpaceNow(t *testing.T, c *clientv3.Client) (uint64, revKeySpace) {
	t.Helper()
	resp, err := c.Get(ctxFor(10*time.Second), string(revStart), clientv3.WithRange(string(revEnd)))
	if err != nil {
		t.Fatalf("reading the key space: %v", err)
	}
	return uint64(resp.Header.Revision), etcdKeySpace(resp.Kvs)
}

// TestEtcdAPILinearizableUnderFaults: clientv3 clients on the three
// nodes' etcd endpoints Put with prev_kv, delete (one key, or the key
// space by one DeleteRange) with prev_kvs, run transactions guarded by a
// key's mod_revision, Get (linearizable, and a few serializable), Range
// the key space at the latest revision and at past ones, and compact,
// while the leader is killed, partitioned away and frozen (casFaults).
// porcupine checks the history against etcd's KV semantics (etcdModel):
// every response's header revision, every key's create and mod revision
// and version, prev_kv, past reads, ErrCompacted only below the
// compaction; writes that failed may or may not have been applied.
// Serializable Gets are checked only for showing a state the store was in
// at their revision. After the faults, the etcd API's revisions are
// kvd's + 1.
func TestEtcdAPILinearizableUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the fault test in -short mode")
	}
	pc, etcd := etcdCluster(t)
	var urls []string
	for _, p := range pc.Procs {
		urls = append(urls, etcd[p.Addr])
	}
	rev, keys := etcdKeySpaceNow(t, etcdClientOf(t, urls...))
	initial := revState{Head: &revNode{Rev: rev, Keys: keys}, Compacted: 1}
	base := workload{keys: len(revKeys), timeout: opTimeout, writers: revWriters, need: etcdCensus, etcd: etcd}
	ops := historyOn(t, pc, base, runEtcdClient, casFaults(t, pc))
	etcdCensus.require(t, ops)
	checkLinearizable(t, etcdModel(initial), ops, "kvd-etcd-linearizability", revCheckBudget)
	checkEtcdRevisionsAreKvdsPlusOne(t, pc, etcdClientOf(t, urls...))
}

// etcdCensus sorts runEtcdClient's operations by kind and result.
var etcdCensus = census{
	kind: func(op porcupine.Operation) string {
		in, out := op.Input.(etcdInput), op.Output.(etcdOutput)
		if in.Op == "del" && out.Result == "ok" {
			return fmt.Sprintf("del deleted=%v", out.Deleted > 0)
		}
		return in.Op + " " + out.Result
	},
	required: []string{"put ok", "del deleted=true", "del-all ok", "txn ok", "txn else", "get ok", "sget ok",
		"range ok", "range-at ok", "range-at compacted", "compact ok"},
}

// checkEtcdRevisionsAreKvdsPlusOne reads the key space through kvd's
// client and through etcd's API with no write between: etcd's header,
// create and mod revisions are kvd's + 1, versions and values the same.
func checkEtcdRevisionsAreKvdsPlusOne(t *testing.T, pc *kvdtest.ProcCluster, ec *clientv3.Client) {
	t.Helper()
	c := newClient(t, pc.Endpoints(), client.Linearizable)
	rr, err := c.Range(ctxFor(10*time.Second), revStart, revEnd)
	if err != nil {
		t.Fatalf("reading the key space through kvd's client: %v", err)
	}
	want := revKVsOf(rr.KVs)
	for i := range want {
		if want[i].Exists {
			want[i].Create++
			want[i].Mod++
		}
	}
	rev, got := etcdKeySpaceNow(t, ec)
	if rev != rr.Revision+1 || got != want {
		t.Errorf("etcd's API shows rev %d: %s; kvd's client rev %d: %s (want etcd's = kvd's + 1)", rev, got, rr.Revision, revKVsOf(rr.KVs))
	}
}
