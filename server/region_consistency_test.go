package server_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	kvsm "github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/mirror"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport/tcp"
)

// The region and Pebble are one state: no RPC read answers ahead of the
// region, a write is answered only once the region shows it, and a lease
// ends for one-sided readers while the apply is stuck behind the table.

// rawGet sends one RPC GET with the given consistency flag, bypassing the
// client's one-sided path, and returns the value (nil with ok=false on any
// failure or timeout).
func rawGet(t *testing.T, addr string, key []byte, flags uint16, timeout time.Duration) (value []byte, ok bool) {
	t.Helper()
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := tr.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := wire.Request{Op: wire.OpGet, Flags: flags, ID: 1, Key: key}
	if err := conn.Send(ctx, wire.AppendRequest(nil, &req)); err != nil {
		return nil, false
	}
	buf, err := conn.Recv(ctx, nil)
	if err != nil {
		return nil, false
	}
	var resp wire.Response
	if err := wire.DecodeResponse(buf, &resp); err != nil || resp.Status != wire.StatusOK {
		return nil, false
	}
	return append([]byte(nil), resp.Value...), true
}

// TestRPCReadNeverAheadOfRegion: Pebble commits a
// write before the region shows it (the apply waits for the table lock,
// here held by the test as a repair pass or a scrape would). An RPC read
// that answered from Pebble would return the new value, and a one-sided
// GET after it the old one: reads going backwards. Every RPC read must see
// the region's state. (Since every batch is announced to the region before
// its commit, which takes the table lock, the write now waits for the
// table before it reaches Pebble; the reads are checked all the same.)
func TestRPCReadNeverAheadOfRegion(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: 1 << 20})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	key, v1, v2 := []byte("k"), []byte("v1"), []byte("v2")
	if err := c.Put(ctx, key, v1); err != nil {
		t.Fatal(err)
	}

	release := server.HoldTable(n.Srv)
	defer func() { release() }()
	putDone := make(chan error, 1)
	go func() { // straight to raft: the server's admission check would wait for the table too
		_, err := n.Srv.KV().Put(ctx, key, v2, raft.Admission{})
		putDone <- err
	}()
	time.Sleep(300 * time.Millisecond) // the write reaches the raft loop, which waits for the table
	for _, flags := range []uint16{wire.Serializable} {
		rpc, ok := rawGet(t, n.Addr, key, flags, 300*time.Millisecond)
		one, err := c.Get(ctx, key, client.WithConsistency(client.Serializable))
		if err != nil {
			t.Fatal(err)
		}
		if ok && bytes.Equal(rpc, v2) && bytes.Equal(one, v1) {
			t.Fatalf("flags %d: an RPC read returned %q, then a one-sided read returned %q: reads went backwards", flags, rpc, one)
		}
	}
	release()
	release = func() {}
	if err := <-putDone; err != nil {
		t.Fatal(err)
	}
	if v, ok := rawGet(t, n.Addr, key, wire.ReadIndex, 5*time.Second); !ok || !bytes.Equal(v, v2) {
		t.Fatalf("after the apply: RPC read %q %v, want %q", v, ok, v2)
	}
}

// TestLeaseLapsesWhileTableHeld: a node whose apply
// is stuck behind the table lock stops extending its lease, and the lease
// must end for readers at its expiry without the node having to clear
// anything (which would need the lock). A one-sided linearizable GET must
// not be accepted once the lease would have run out.
func TestLeaseLapsesWhileTableHeld(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: 1 << 20})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), ReadRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, []byte("k")); err != nil || c.Stats().OneSided != 1 {
		t.Fatalf("warm-up GET: %v, stats %+v", err, c.Stats())
	}

	release := server.HoldTable(n.Srv)
	defer func() { release() }()
	go n.Srv.KV().Put(context.Background(), []byte("other"), []byte("x"), raft.Admission{}) // the raft loop now blocks in Apply
	time.Sleep(3 * time.Second)                                                             // well past a lease (800 ms by default)
	before := c.Stats().OneSided
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	v, err := c.Get(gctx, []byte("k"))
	cancel()
	if c.Stats().OneSided != before {
		t.Fatalf("a one-sided linearizable GET was accepted (%q, %v) from a node whose lease ran out while its apply was stuck", v, err)
	}
}

// TestFailedRebuildStaysIncomplete: a rebuild that fails part-way leaves a
// partial region, which must stay flagged incomplete (so no reader trusts a
// miss) until a rebuild succeeds; misses meanwhile are answered by RPC.
func TestFailedRebuildStaysIncomplete(t *testing.T) {
	var f server.Faults
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: 1 << 20, ReuseGrace: 50 * time.Millisecond, Knobs: f.KnobsFor})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Serializable)
	ctx := context.Background()
	for i := range 10 {
		if err := c.Put(ctx, []byte(fmt.Sprintf("k%d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	f.FailRebuilds(3)
	server.Rebuild(n.Srv)
	if !n.Srv.TableHeader().Incomplete {
		t.Fatal("a rebuild that failed after 3 of 10 keys left the region flagged complete")
	}
	if v, ok := server.Gauge(n.Srv, "kvd_table_incomplete"); !ok || v != 1 {
		t.Errorf("kvd_table_incomplete = %v (found %v) with the region partial, want 1", v, ok)
	}
	before := c.Stats()
	for i := range 10 { // every key still found: misses of the partial region go to RPC
		if _, err := c.Get(ctx, []byte(fmt.Sprintf("k%d", i))); err != nil {
			t.Fatalf("k%d after a failed rebuild: %v", i, err)
		}
	}
	if c.Stats().RPCGets == before.RPCGets {
		t.Fatal("no read was answered by RPC, yet the region holds only 3 keys")
	}
	f.FailRebuilds(-1) // the repair loop retries the rebuild
	wait.For(t, "the region to become complete once rebuilds work again", func() bool { return !n.Srv.TableHeader().Incomplete })
	if st := n.Srv.Status(); st.Keys != 10 {
		t.Fatalf("region holds %d keys after the retried rebuild, want 10", st.Keys)
	}
	if v, ok := server.Gauge(n.Srv, "kvd_table_incomplete"); !ok || v != 0 {
		t.Errorf("kvd_table_incomplete = %v (found %v) with the region complete, want 0", v, ok)
	}
	if v, ok := server.Gauge(n.Srv, "kvd_table_slots_pending"); !ok || v != 0 {
		t.Errorf("kvd_table_slots_pending = %v (found %v) with the region complete, want 0", v, ok)
	}
}

// TestPutAnsweredOnlyOnceTheRegionShowsIt: a PUT is acknowledged only
// after the leader applied it to its table region (docs/consistency.md,
// "What the region promises", 1), so a one-sided GET that starts after the
// acknowledgement reads the new value. Answered earlier, a client could
// PUT, be told it is done, and read the old value from the region.
//
// The test holds the batch carrying k=v2 out of the region (Knobs.
// BeforeApply blocks the apply) while the PUT is in flight. The PUT must
// not be answered while the batch is held; once it is let through, the
// answer comes, and a one-sided GET after it reads v2. The only wait is
// holdFor, for an answer that must not come: however loaded the machine,
// the test cannot fail on a server that answers after the apply, and a
// server that answers before it does so a few scheduler hops after the
// commit, well within it. The GET after the answer is serializable: it
// reads the leader's region one-sided whatever the lease, which the held
// loop may have let lapse.
func TestPutAnsweredOnlyOnceTheRegionShowsIt(t *testing.T) {
	skipShort(t)
	const holdFor = time.Second
	var (
		mu      sync.Mutex
		armed   bool
		held    = make(chan struct{})
		release = make(chan struct{})
		letGo   = sync.OnceFunc(func() { close(release) })
	)
	hold := func(ws []kvsm.Write) {
		mu.Lock()
		hit := armed && hasWrite(ws, "k", "v2")
		if hit {
			armed = false
		}
		mu.Unlock()
		if hit {
			close(held)
			<-release
		}
	}
	addr := kvdtest.FreeAddrs(t, 1)[0]
	tr, err := tcp.New(tcp.Config{Node: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	srv, err := server.New(server.Config{Listen: addr, DataDir: t.TempDir(), Transport: tr, TableMem: 1 << 20,
		Logger: quietLog(), Knobs: server.Knobs{Mirror: mirror.Knobs{BeforeApply: hold}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(letGo) // before Close: a held apply would hold it
	wait.For(t, "a leader with a valid lease", func() bool { st := srv.Status(); return st.IsLeader && st.LeaseValid })

	c := newPatientClient(t, []string{addr}, client.Linearizable)
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, []byte("k"), client.WithConsistency(client.Serializable)); err != nil || string(v) != "v1" {
		t.Fatalf("get k = %q, %v; want v1", v, err)
	}

	mu.Lock()
	armed = true
	mu.Unlock()
	type read struct {
		value     string
		err       error
		oneSided  bool
		afterHeld bool // the read began while the batch was still held
	}
	answered := make(chan error, 1)
	readAfter := make(chan read, 1)
	go func() {
		answered <- c.Put(ctx, []byte("k"), []byte("v2"))
		s0 := c.Stats()
		stillHeld := true
		select {
		case <-release:
			stillHeld = false
		default:
		}
		v, err := c.Get(ctx, []byte("k"), client.WithConsistency(client.Serializable))
		readAfter <- read{value: string(v), err: err, oneSided: c.Stats().OneSided > s0.OneSided, afterHeld: stillHeld}
	}()

	select {
	case <-held:
	case <-time.After(15 * time.Second):
		t.Fatal("the batch with k=v2 never reached the region's apply")
	}
	select {
	case err := <-answered:
		r := <-readAfter // a one-sided read: it does not wait for the apply
		letGo()
		t.Fatalf("PUT k=v2 answered (err %v) while its batch was held out of the region; "+
			"a GET after the answer read %q (err %v, one-sided %v, began while held %v)",
			err, r.value, r.err, r.oneSided, r.afterHeld)
	case <-time.After(holdFor):
	}
	letGo()
	if err := <-answered; err != nil {
		t.Fatalf("PUT k=v2: %v", err)
	}
	r := <-readAfter
	if r.err != nil || r.value != "v2" || !r.oneSided {
		t.Fatalf("GET after the PUT's answer: %q, %v (one-sided %v); want v2, one-sided", r.value, r.err, r.oneSided)
	}
}

func hasWrite(ws []kvsm.Write, key, value string) bool {
	for _, w := range ws {
		if string(w.Key) == key && string(w.Value) == value && !w.Deleted {
			return true
		}
	}
	return false
}
