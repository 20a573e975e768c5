//go:build rdma

package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/rdma"
)

// TestRDMAPartitionLinearizable isolates the leader of a 3-node cluster
// whose nodes talk Raft over RDMA, while clients do linearizable one-sided
// GETs and PUTs; the history is checked with porcupine, as in
// TestRDMAFreezeLinearizable, whose recorder and schedule it shares.
//
// kvd's fault endpoint (?drop=) cuts peers apart only on the tcp transport,
// so the nodes run in this process, each on its own rdma.Transport wrapped
// in cutTransport, which drops the Raft messages a node sends to the peers
// it is cut from (Raft sends only on connections it dialled, so dropping at
// both ends' senders is a full partition). Clients are never cut: the
// isolated leader stays reachable, and unlike a frozen one it keeps
// running (ticking, trying to reach its peers, writing its region).
//
// Schedule: writers pause, the controller writes a baseline value to every
// key, the leader is isolated, a new leader is elected by the other two,
// the controller writes new values through it (acknowledged), writers
// resume. The nodes tick every 200 ms (elections after 2 s), which the
// VM's shared CPU needs with three nodes and the clients in one process.
// Asserted: a new leader is elected and acknowledges writes; the
// isolated node gives up its lease; no GET (in particular none of the
// clients pinned to the isolated node, which can only READ its region)
// returns a superseded value (freezeStale) and porcupine finds the history
// linearizable; after healing, the old leader catches up to the new
// leader's applied index and its region serves the same values. The
// clients pinned to the isolated node must have had one-sided reads of its
// region refused for its lease (or for a clock sample too old to judge it).
func TestRDMAPartitionLinearizable(t *testing.T) {
	const (
		keys         = 4
		mixedClients = 2
		pinned       = 2
		freshClients = 2
		warmup       = 3 * time.Second
		holdCut      = 6 * time.Second // after the new values are acknowledged
		afterHeal    = 3 * time.Second
		opTimeout    = 4 * time.Second
	)
	nodes := startRDMANodes(t, 3, 7541)
	tr := quietTransport(t)
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.addr)
	}
	ctl := partClient(t, tr, eps)
	old := rdmaNodeLeader(nodes, 30*time.Second)
	if old == nil {
		t.Fatal("no leader over RDMA within 30s")
	}
	var survivors []*rdmaNode
	for _, n := range nodes {
		if n != old {
			survivors = append(survivors, n)
		}
	}

	sc := newFaultScenario(t, keys, opTimeout)
	rec := sc.rec
	healed := true
	sc.undo = func() {
		if !healed {
			healed = true
			for _, s := range survivors {
				old.tr.cut(s.addr, false)
				s.tr.cut(old.addr, false)
			}
		}
	}
	for i := 0; i < mixedClients; i++ {
		sc.start("mixed", i, partClient(t, tr, eps), false)
	}
	for i := 0; i < pinned; i++ {
		sc.start("pinned", 10+i, partClient(t, tr, []string{old.addr}), true)
	}
	time.Sleep(warmup)

	sc.gate.Lock()
	sc.writeAll(ctl, 100, "base-")
	time.Sleep(500 * time.Millisecond)

	retriesBefore := sc.pinnedRetries()
	healed = false
	for _, s := range survivors {
		old.tr.cut(s.addr, true)
		s.tr.cut(old.addr, true)
	}
	cutAt := rec.now()
	t.Logf("isolated leader %d at %s", old.id, ms(cutAt))

	nl := rdmaNodeLeader(survivors, 30*time.Second)
	if nl == nil {
		sc.gate.Unlock()
		sc.fatalf("no new leader among the other two within 30s of isolating %d", old.id)
	}
	electedAt := rec.now()
	t.Logf("new leader %d at %s", nl.id, ms(electedAt))
	fresh := []string{nl.addr}
	for _, s := range survivors {
		if s != nl {
			fresh = append(fresh, s.addr)
		}
	}
	for i := 0; i < freshClients; i++ {
		sc.start("fresh", 20+i, partClient(t, tr, fresh), false)
	}
	ctl2 := partClient(t, tr, fresh)
	_, allAcked := sc.writeAll(ctl2, 101, "new-")
	sc.gate.Unlock()
	t.Logf("new values of all %d keys acknowledged at %s", keys, ms(allAcked))

	// The isolated node must have given up its lease by now (a new leader
	// committed writes), and keep it given up while cut off.
	deadline := time.Now().Add(holdCut)
	leaseSeen := false
	for time.Now().Before(deadline) {
		if st := old.srv.Status(); st.IsLeader && st.LeaseValid {
			leaseSeen = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	healAt := rec.now()
	retriesCut := sc.pinnedRetries()
	dropped := old.tr.dropped.Load()
	sc.undo()
	t.Logf("healed at %s; the isolated node's transport dropped %d messages to its peers", ms(healAt), dropped)
	time.Sleep(afterHeal)
	sc.stopClients()
	endAt := rec.now()

	// The old leader catches up: its applied index reaches the leader's,
	// and its region serves what the leader serves.
	var want uint64
	catchUp := time.Now().Add(30 * time.Second)
	for {
		var lead *rdmaNode
		for _, n := range nodes {
			if st := n.srv.Status(); st.IsLeader {
				lead, want = n, st.Applied
			}
		}
		if lead != nil && old.srv.Status().Applied >= want {
			break
		}
		if time.Now().After(catchUp) {
			t.Fatalf("node %d applied %d after healing, leader %d", old.id, old.srv.Status().Applied, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ser := scenClient(t, tr, []string{old.addr}, client.Serializable)
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("k%d", k)
		v, err := ctl2.Get(ctxFor(10*time.Second), []byte(key))
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("GET %s from the cluster after healing: %v", key, err)
		}
		if err != nil {
			v = nil // deleted: the old leader's region must not have it either
		}
		scenSettle(t, ser, key, v)
	}

	ops := rec.snapshot()
	var pinnedTries, pinnedOK, freshWrites int
	hist, completed, maybe := faultHistory(ops, func(o freezeOp) {
		switch {
		case o.in.Op == "get" && o.kind == "pinned" && o.call >= allAcked && o.call < healAt:
			pinnedTries++
			if !o.failed && o.ret < healAt {
				pinnedOK++
			}
		case o.in.Op != "get" && o.kind == "fresh" && !o.out.Unknown && o.ret < healAt:
			freshWrites++
		}
	})
	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(kvModel, hist, 90*time.Second)
	checkTook := time.Since(checkStart)
	stale := freezeStale(ops)
	fmt.Printf("RDMAVM-PARTITION: porcupine: %s, %d ops (%d completed, %d maybe-applied); isolated leader's clients after the new values: "+
		"%d GETs started, %d answered before the heal; %d writes acknowledged by the majority during the partition; %d definitely stale reads\n",
		faultVerdict(res), len(hist), completed, maybe, pinnedTries, pinnedOK, freshWrites, len(stale))
	rejected := retriedSince(retriesBefore, retriesCut)
	fmt.Printf("RDMAVM-PARTITION: the isolated leader's clients' one-sided attempts retried during the partition, by reason: %v\n", rejected)
	fmt.Printf("RDMAVM-PARTITION: timeline: cut %s, new leader %d elected %s, new values acknowledged %s, heal %s, end %s; "+
		"node %d caught up to applied %d; porcupine took %.1fs\n",
		ms(cutAt), nl.id, ms(electedAt), ms(allAcked), ms(healAt), ms(endAt), old.id, want, checkTook.Seconds())
	for i, w := range stale {
		g := ops[i]
		fmt.Printf("RDMAVM-PARTITION: stale read: %s client %d get(%s) at %s..%s -> %q (one-sided %v), replaced by %q at %s\n",
			g.kind, g.client, g.in.Key, ms(g.call), ms(g.ret), g.out.Value, g.oneSided, w.by.in.Value, ms(w.at))
	}

	if completed < 100 {
		t.Errorf("only %d operations completed: the history checks too little", completed)
	}
	if leaseSeen {
		t.Errorf("node %d still reported a valid leader lease after the new leader acknowledged writes", old.id)
	}
	if pinnedTries == 0 {
		t.Errorf("the clients pinned to the isolated leader tried no GET while it was cut off")
	}
	if rejected["lease"]+rejected["clock"] == 0 {
		t.Errorf("no one-sided read of the isolated leader's region was refused for its lease while it was cut off")
	}
	if freshWrites == 0 {
		t.Errorf("the majority acknowledged no writes from its clients during the partition")
	}
	if dropped == 0 {
		t.Errorf("the isolated node's transport dropped nothing: the partition cut nothing")
	}
	judgeFault(t, "RDMAVM-PARTITION", "kvd-rdma-partition", res, info, ops, stale, func() {})
}

// partClient is a linearizable client of tr whose attempt timeout allows
// for the VM's slow, shared CPU (a PUT there can take over the default
// second).
func partClient(t *testing.T, tr transport.Transport, eps []string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: eps, Transport: tr, Consistency: client.Linearizable,
		DialTimeout: 2 * time.Second, AttemptTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rdmaNode is one kvd node run in the test process on its own RDMA
// transport.
type rdmaNode struct {
	id   uint64
	addr string
	srv  *server.Server
	tr   *cutTransport
	logs *scenLog
}

// quietConfig is the RDMA transport configuration of this test's nodes and
// clients. They all share one process, whose Go scheduler has only the VM's
// two CPUs: transports that spin while they wait for a completion (the
// default) let busy clients starve the nodes' Raft loops of CPU, and
// elections then never settle. Without spinning, a waiting goroutine sleeps
// on the completion channel.
func quietConfig() rdma.Config {
	return rdma.Config{Device: os.Getenv("KVD_RDMA_DEVICE"), SpinPoll: -1}
}

// quietTransport is one quietConfig transport shared by the test's clients;
// it is closed after them.
func quietTransport(t *testing.T) transport.Transport {
	t.Helper()
	rdmaHost(t)
	tr, err := rdma.New(quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// startRDMANodes starts n in-process nodes listening on the RDMA device's
// address from port base up, and closes them at the end of the test.
func startRDMANodes(t *testing.T, n, base int) []*rdmaNode {
	t.Helper()
	host := rdmaHost(t)
	cluster := map[uint64]string{}
	for i := 1; i <= n; i++ {
		cluster[uint64(i)] = fmt.Sprintf("%s:%d", host, base+i-1)
	}
	var nodes []*rdmaNode
	for i := 1; i <= n; i++ {
		inner, err := rdma.New(quietConfig())
		if err != nil {
			t.Fatal(err)
		}
		ct := &cutTransport{Transport: inner, cuts: map[string]bool{}}
		logs := &scenLog{}
		srv, err := server.New(server.Config{
			ID: uint64(i), Listen: cluster[uint64(i)], DataDir: t.TempDir(), Transport: ct,
			InitialCluster: cluster, TableMem: 16 << 20, TickInterval: 200 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		})
		if err != nil {
			inner.Close()
			t.Fatalf("node %d: %v", i, err)
		}
		nd := &rdmaNode{id: uint64(i), addr: cluster[uint64(i)], srv: srv, tr: ct, logs: logs}
		nodes = append(nodes, nd)
		t.Cleanup(func() { nd.srv.Close(); nd.tr.Close() })
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("node %d's last log lines:\n%s", nd.id, scenTail(nd.logs.String(), 25))
			}
		})
	}
	return nodes
}

// scenLog is a node's log, kept for a failing test to print.
type scenLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *scenLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *scenLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// rdmaNodeLeader polls nodes until one is leader with a valid lease.
func rdmaNodeLeader(nodes []*rdmaNode, within time.Duration) *rdmaNode {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if st := n.srv.Status(); st.IsLeader && st.LeaseValid {
				return n
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// cutTransport wraps a node's transport so that the messages it sends to
// chosen peers (by the address it dialled) are dropped, as the tcp
// transport's Filter does: Send reports success and the peer never sees
// the message. Listening, accepting and one-sided READs pass through.
type cutTransport struct {
	transport.Transport
	mu      sync.Mutex
	cuts    map[string]bool
	dropped atomic.Int64
}

func (c *cutTransport) cut(addr string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cuts[addr] = on
}

func (c *cutTransport) isCut(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cuts[addr]
}

func (c *cutTransport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	conn, err := c.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: conn, t: c, peer: addr}, nil
}

type cutConn struct {
	transport.Conn
	t    *cutTransport
	peer string
}

func (c *cutConn) Send(ctx context.Context, msg []byte) error {
	if c.t.isCut(c.peer) {
		c.t.dropped.Add(1)
		return nil
	}
	return c.Conn.Send(ctx, msg)
}
