//go:build rdma

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/transport/rdma"
)

// TestRDMACASAndTxn: compare-and-swap, transactions and a prefix scan
// through a 3-node cluster whose clients and peers talk RDMA, and one-sided
// GETs that see a transaction all or nothing.
//
// A writer sets keys a and b to the same counter in one transaction per
// step; readers GET a, then b, one-sided. A transaction's writes become
// visible together (docs/layout.md, "Atomic groups"), and the reads do not
// overlap, so b, read after a, is never behind it: b < a would mean the
// reader saw a transaction's write to a and then missed its write to b.
func TestRDMACASAndTxn(t *testing.T) {
	pc := rdmaCluster(t)
	c := rdmaClient(t, pc.Endpoints(), client.Linearizable)
	rdmaLeader(t, c, pc)
	ctx := context.Background()

	// CAS: a create, a stale update refused with the current version, a
	// current one accepted, a conditional delete.
	k := []byte("cas")
	v1, err := c.PutRevision(ctx, k, []byte("one"), client.IfModRevision(0))
	if err != nil {
		t.Fatalf("create with IfVersion(0): %v", err)
	}
	if _, err := c.PutRevision(ctx, k, []byte("again"), client.IfModRevision(0)); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("second create = %v; want ErrConflict", err)
	}
	v2, err := c.PutRevision(ctx, k, []byte("two"), client.IfModRevision(v1))
	if err != nil {
		t.Fatalf("update at the current version: %v", err)
	}
	_, err = c.PutRevision(ctx, k, []byte("stale"), client.IfModRevision(v1))
	var ce *client.ConflictError
	if !errors.As(err, &ce) || ce.ModRevision != v2 {
		t.Fatalf("update at a stale version = %v; want a ConflictError naming version %d", err, v2)
	}
	if got, ver, err := c.GetModRevision(ctx, k); err != nil || string(got) != "two" || ver != v2 {
		t.Fatalf("one-sided GET after the CAS: %q at %d, %v; want \"two\" at %d", got, ver, err, v2)
	}
	if err := c.Delete(ctx, k, client.IfModRevision(v2)); err != nil {
		t.Fatalf("conditional delete: %v", err)
	}

	// Transactions racing one-sided readers.
	a, b := []byte("txn-a"), []byte("txn-b")
	if _, err := c.Txn(ctx, client.Txn{Then: []client.Op{client.OpPut(a, []byte("0")), client.OpPut(b, []byte("0"))}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, oneSided atomic.Int64
	var bad atomic.Value
	for r := range 2 {
		rc := rdmaClient(t, pc.Endpoints(), client.Linearizable)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				before := rc.Stats().OneSided
				va, err1 := rc.Get(ctxFor(10*time.Second), a)
				vb, err2 := rc.Get(ctxFor(10*time.Second), b)
				if err1 != nil || err2 != nil {
					bad.Store(fmt.Sprintf("reader %d: %v, %v", r, err1, err2))
					return
				}
				na, _ := strconv.Atoi(string(va))
				nb, _ := strconv.Atoi(string(vb))
				if nb < na {
					bad.Store(fmt.Sprintf("reader %d read a=%d, then b=%d: half a transaction", r, na, nb))
					return
				}
				reads.Add(1)
				if rc.Stats().OneSided-before == 2 {
					oneSided.Add(1)
				}
			}
		}()
	}
	// A reader of both keys as one snapshot (GetManyAtomic): one-sided
	// by a double collect, or by RPC when the keys move under it or the
	// list names a missing key.
	var snaps atomic.Int64
	ac := rdmaClient(t, pc.Endpoints(), client.Linearizable)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			keys := [][]byte{a, b}
			if i%2 == 1 {
				keys = append(keys, []byte("txn-none"))
			}
			res, index, err := ac.GetManyAtomic(ctxFor(10*time.Second), keys)
			if err != nil {
				bad.Store(fmt.Sprintf("atomic reader: %v", err))
				return
			}
			if !res[0].Found || string(res[0].Value) != string(res[1].Value) || res[0].ModRevision != res[1].ModRevision ||
				res[0].ModRevision > index || (len(res) == 3 && res[2].Found) {
				bad.Store(fmt.Sprintf("atomic reader: not one snapshot at index %d: %+v", index, res))
				return
			}
			snaps.Add(1)
		}
	}()
	const steps = 150
	for i := 1; i <= steps; i++ {
		n := []byte(strconv.Itoa(i))
		prev := []byte(strconv.Itoa(i - 1))
		resp, err := c.Txn(ctxFor(20*time.Second), client.Txn{
			If:   []client.Cmp{client.CompareValue(a, client.CmpEqual, prev)},
			Then: []client.Op{client.OpPut(a, n), client.OpPut(b, n)},
		})
		if err != nil || !resp.Succeeded {
			close(stop)
			wg.Wait()
			t.Fatalf("transaction %d: %+v, %v; want it to succeed (a was %d)", i, resp, err, i-1)
		}
	}
	close(stop)
	wg.Wait()
	if msg := bad.Load(); msg != nil {
		t.Fatal(msg)
	}
	resp, err := c.Txn(ctx, client.Txn{
		If:   []client.Cmp{client.CompareValue(a, client.CmpEqual, []byte("0"))},
		Then: []client.Op{client.OpDelete(a)},
		Else: []client.Op{client.OpGet(a), client.OpGet(b)},
	})
	if err != nil || resp.Succeeded || len(resp.Results) != 2 ||
		string(resp.Results[0].Value) != strconv.Itoa(steps) || string(resp.Results[1].Value) != strconv.Itoa(steps) {
		t.Fatalf("a failing compare: %+v, %v; want the Else branch's two GETs of %d", resp, err, steps)
	}
	// Quiet now: a snapshot of existing keys is proven one-sided.
	before := ac.Stats()
	if res, _, err := ac.GetManyAtomic(ctx, [][]byte{a, b}); err != nil || string(res[1].Value) != strconv.Itoa(steps) {
		t.Fatalf("quiet atomic read: %+v, %v", res, err)
	}
	after := ac.Stats()
	if after.AtomicOneSided != before.AtomicOneSided+1 {
		t.Errorf("quiet atomic read of two existing keys not proven one-sided: stats %+v", after)
	}
	// A prefix scan over RDMA (SEND/RECV, served from the applied state),
	// one key per page, sees both keys at the last transaction's version.
	rr, err := c.Prefix(ctx, []byte("txn-"), client.WithLimit(1))
	if err != nil || len(rr.KVs) != 1 || !rr.More {
		t.Fatalf("first page of the prefix scan: %+v, %v; want 1 key and more", rr, err)
	}
	all, err := c.Prefix(ctx, []byte("txn-"))
	if err != nil || len(all.KVs) != 2 || string(all.KVs[0].Key) != "txn-a" || string(all.KVs[1].Key) != "txn-b" ||
		string(all.KVs[0].Value) != strconv.Itoa(steps) || all.KVs[0].ModRevision != all.KVs[1].ModRevision {
		t.Fatalf("prefix scan: %+v, %v; want txn-a and txn-b at %d, written by one transaction", all, err, steps)
	}
	// A watch over RDMA (events pushed by the server as messages) replays
	// the last transaction: its two events, of one version.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	var evs []client.Event
	for r := range c.Watch(wctx, []byte("txn-"), client.WithPrefix(), client.WithFromRevision(all.KVs[0].ModRevision)) {
		if r.Err != nil {
			t.Fatalf("watch: %v", r.Err)
		}
		if evs = append(evs, r.Events...); len(evs) >= 2 {
			break
		}
	}
	wcancel()
	if len(evs) != 2 || evs[0].ModRevision != all.KVs[0].ModRevision || evs[1].ModRevision != evs[0].ModRevision ||
		string(evs[0].Value) != strconv.Itoa(steps) {
		t.Fatalf("watch from version %d: %+v; want the last transaction's two PUTs", all.KVs[0].ModRevision, evs)
	}
	fmt.Printf("RDMAVM-TXN: CAS create/conflict/update/stale-conflict/delete ok; %d transactions of 2 keys raced %d pairs of GETs (%d pairs both one-sided), none saw half a transaction; %d atomic snapshots (%d proven one-sided, %d by RPC) all whole; prefix scan paged and whole ok; watch replay ok\n",
		steps, reads.Load(), oneSided.Load(), snaps.Load(), after.AtomicOneSided, after.AtomicRPC)
	if oneSided.Load() == 0 {
		t.Errorf("no pair of GETs was answered one-sided: the test checked the RPC path only")
	}
}

// rdmaHistory is historyOn for a 3-node cluster whose peers and clients
// talk RDMA: the same clients and checks as the TCP fault tests, and their
// faults but the partition (kvd's fault endpoint serves TCP clusters only;
// the RDMA partition test cuts in-process transports instead): the leader
// SIGKILLed and restarted, the leader SIGSTOPped while the NIC keeps
// answering READs of its region.
func rdmaHistory(t *testing.T, run clientFunc, need census, keys int) []porcupine.Operation {
	pc, base, faults := rdmaFaults(t, keys)
	base.need = need
	return historyOn(t, pc, base, run, faults)
}

// rdmaFaults starts rdmaHistory's cluster and returns it, the workload
// its clients are made from and its faults.
func rdmaFaults(t *testing.T, keys int) (*kvdtest.ProcCluster, workload, []fault) {
	pc := rdmaCluster(t)
	tr, err := rdma.New(rdma.Config{Device: os.Getenv("KVD_RDMA_DEVICE")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	clientTransports.Store(pc, tr)
	t.Cleanup(func() { clientTransports.Delete(pc) })
	leaderOf(t, pc, 20*time.Second)
	faults := []fault{killLeader(t, pc, 3*time.Second), stopLeader(t, pc, 6*time.Second)}
	return pc, workload{keys: keys, timeout: opTimeout, tr: tr, dial: 2 * time.Second}, faults
}

// TestRDMACASUnderFaults is TestCASLinearizableUnderFaults over RDMA.
func TestRDMACASUnderFaults(t *testing.T) {
	checkCASHistory(t, rdmaHistory(t, runCASClient, casCensus, 3))
}

// TestRDMATxnUnderFaults is TestTxnLinearizableUnderFaults over RDMA:
// transactions, GetManyAtomic, prefix scans and one-sided GETs, checked
// against one key space.
func TestRDMATxnUnderFaults(t *testing.T) {
	checkTxnHistory(t, rdmaHistory(t, runTxnClient, txnCensus, len(txnKeys)))
}

// TestRDMARevisionsUnderFaults is TestRevisionsLinearizableUnderFaults
// over RDMA: the revision workload (one-sided GETs with metadata among
// it) checked against the store with revisions.
func TestRDMARevisionsUnderFaults(t *testing.T) {
	pc, base, faults := rdmaFaults(t, len(revKeys))
	initial, ops := revisionHistory(t, pc, base, faults)
	checkRevisionHistory(t, initial, ops)
}

// stopLeader SIGSTOPs the leader for d, then SIGCONTs it: the process
// stalls whole while the NIC still answers READs of its region.
func stopLeader(t *testing.T, pc *kvdtest.ProcCluster, d time.Duration) fault {
	return fault{name: fmt.Sprintf("SIGSTOP the leader for %v (the NIC still answers READs)", d), settle: 2 * time.Second, do: func() {
		l := leaderOf(t, pc, 15*time.Second)
		pid := l.Pid()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP leader %d (pid %d): %v", l.ID, pid, err)
		}
		defer syscall.Kill(pid, syscall.SIGCONT)
		time.Sleep(d)
	}}
}
