package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/server"
)

// Admission (handler.go put, txn.go admitTxn) reserves the room a write's
// apply will take, so that every committed write fits its leader's region
// and a node restarted with the same --table-mem can rebuild its region.
// These tests attack the two ends of a reservation: when it ends, and
// which state it is sized against.

// fillToOneMore fills the table with values of n bytes until refused, then
// deletes one, so that exactly one more record of n bytes fits, and waits
// until every node has applied the delete and its grace period has passed.
func fillToOneMore(t *testing.T, c *client.Client, n int, nodes []*kvdtest.Node) {
	t.Helper()
	var first string
	for i := 0; ; i++ {
		k := fmt.Sprintf("fill-%d", i)
		err := c.Put(context.Background(), []byte(k), bytes.Repeat([]byte{'f'}, n))
		if errors.Is(err, client.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		if first == "" {
			first = k
		}
	}
	if err := c.Delete(context.Background(), []byte(first)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the deleted record's room to be free on every node", func() bool {
		var commit uint64
		for _, nd := range nodes {
			if st := nd.Srv.Node().Status(); st.IsLeader {
				commit = st.Commit
			}
		}
		for _, nd := range nodes {
			st := nd.Srv.TableStats()
			if commit == 0 || nd.Srv.Node().Status().Applied < commit || st.BytesLimbo != 0 || st.SlotsPending != 0 {
				return false
			}
		}
		return true
	})
}

// checkFits fails the test if node n applied a committed write its region
// could not hold, or cannot restart with the same --table-mem.
func checkFits(t *testing.T, n *kvdtest.Node) {
	t.Helper()
	if st := n.Srv.TableStats(); st.ApplyMisses != 0 {
		t.Errorf("node %d applied %d committed write(s) its own region could not hold", n.ID, st.ApplyMisses)
	}
	n.Stop()
	if err := n.Start(); err != nil {
		t.Fatalf("restart of node %d with the same --table-mem: %v", n.ID, err)
	}
}

// TestAdmissionOutlivesTheRequest: a PUT whose client goes away after its
// proposal was handed to raft keeps its reservation until the write is
// applied (or can no longer be): the proposal can still commit. Were its
// room given back with the request, a second PUT could be admitted into
// it, both applied, and the leader's region could not hold the first (nor
// could a restart).
func TestAdmissionOutlivesTheRequest(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: fillTableMem, ReuseGrace: fillGrace})
	lead := kvdtest.WaitLeader(t, nodes, 15*time.Second)
	c := newPatientClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	const big = 16 << 10
	fillToOneMore(t, c, big, nodes)
	if err := lead.Srv.Node().Freeze(2 * time.Second); err != nil { // a stalled raft loop: a slow disk, a pause
		t.Fatal(err)
	}
	c1, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), AttemptTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done1 := make(chan error, 1)
	go func() { done1 <- c1.Put(context.Background(), []byte("big1"), bytes.Repeat([]byte{'1'}, big)) }()
	wait.For(t, "big1 admitted", func() bool { return lead.Srv.TableStats().BytesReserved > 0 })
	time.Sleep(100 * time.Millisecond)
	c1.Close() // the client goes away; its PUT is in raft's queue
	<-done1
	if err := c.Put(context.Background(), []byte("big2"), bytes.Repeat([]byte{'2'}, big)); !errors.Is(err, client.ErrNoSpace) {
		t.Errorf("big2 = %v; want kvd: no space in table (big1 holds the last room)", err)
	}
	wait.For(t, "big1 applied", func() bool { _, _, ok, _ := lead.Srv.KV().Get([]byte("big1")); return ok })
	checkFits(t, lead)
}

// TestNewLeaderAdmitsOnlyOnceCaughtUp: a new leader sizes writes against
// its region only once it has applied the entries of earlier terms. Entry
// A, admitted by the old leader into the last room, sits unapplied in the
// new leader's log; were the new leader to admit B into the same room at
// once, both would commit, and no region of that size could hold the data.
func TestNewLeaderAdmitsOnlyOnceCaughtUp(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{TableMem: fillTableMem, ReuseGrace: fillGrace})
	a := kvdtest.WaitLeader(t, nodes, 15*time.Second)
	var b, c *kvdtest.Node
	for _, n := range nodes {
		switch {
		case n == a:
		case b == nil:
			b = n
		default:
			c = n
		}
	}
	cl := newPatientClient(t, []string{a.Addr}, client.Linearizable)
	const big = 16 << 10
	fillToOneMore(t, cl, big, nodes)
	wait.For(t, "followers caught up", func() bool {
		cm := a.Srv.Node().Status().Commit
		return b.Srv.Node().Status().Applied >= cm && c.Srv.Node().Status().Applied >= cm
	})
	a.Isolate(c)
	if err := b.Srv.Node().Freeze(1500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ca, err := client.New(client.Config{Endpoints: []string{a.Addr}, AttemptTimeout: 5 * time.Second, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	go ca.Put(context.Background(), []byte("bigA"), bytes.Repeat([]byte{'A'}, big)) //nolint:errcheck // its outcome is read from b
	// A's append waits in b's queue.
	time.Sleep(300 * time.Millisecond)
	a.Stop()
	cb, err := client.New(client.Config{Endpoints: []string{b.Addr}, AttemptTimeout: 2 * time.Second, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	// B, as soon as b leads, until admitted or refused for space.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if !b.Srv.Node().Status().IsLeader {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		if err = cb.Put(context.Background(), []byte("bigB"), bytes.Repeat([]byte{'B'}, big)); err == nil || errors.Is(err, client.ErrNoSpace) {
			break
		}
	}
	_, _, okA, _ := b.Srv.KV().Get([]byte("bigA"))
	t.Logf("B: %v; A committed: %v", err, okA)
	if okA && !errors.Is(err, client.ErrNoSpace) {
		t.Errorf("B = %v with A committed; want kvd: no space in table", err)
	}
	checkFits(t, b)
}

// TestCloseEndsAnAdmittedWait: an admitted write waits for its proposal's
// outcome whatever becomes of its request, but not past the server's
// closing. With the raft loop frozen (Close is what ends a freeze early,
// after it has waited for the requests), Close must not wait out the
// freeze.
func TestCloseEndsAnAdmittedWait(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), AttemptTimeout: time.Second, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := n.Srv.Node().Freeze(5 * time.Minute); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Put(context.Background(), []byte("b"), []byte("2")) }()
	wait.For(t, "the PUT admitted", func() bool { return n.Srv.TableStats().BytesReserved > 0 })
	<-errc // the client gives up; the server still waits for the proposal
	closed := make(chan struct{})
	go func() { n.Srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close waited for a frozen raft loop to resume (a 5-minute freeze)")
	}
}

// TestLeaderAdmissionCountsMissingKeys: a leader whose region lacks a key
// it holds in Pebble (an apply that did not fit, as a former follower's
// can) must not admit writes into the room that key needs: otherwise the
// committed data outgrows a fresh region of the same size and the node
// cannot restart.
func TestLeaderAdmissionCountsMissingKeys(t *testing.T) {
	skipShort(t)
	var f server.Faults
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: fillTableMem, ReuseGrace: fillGrace, Knobs: f.KnobsFor})
	lead := kvdtest.WaitLeader(t, nodes, 15*time.Second)
	srv := lead.Srv
	c := newPatientClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	big := valueFor(1024)
	if err := c.Put(ctx, []byte("kbig00"), big); err != nil {
		t.Fatal(err)
	}
	resume := f.PauseRepair() // the repair loop would race the PUTs below for the key's room
	server.MissKey(srv, []byte("kbig00"))
	wait.For(t, "the key's slot and bytes to clear", func() bool {
		st := srv.TableStats()
		return st.SlotsPending == 0 && st.BytesLimbo == 0
	})
	// The leader admits 256-byte records until its region is full: the
	// missing key's 1024 bytes included.
	a := putUntilRefused(t, c, "a", valueFor(256))
	resume()
	time.Sleep(10 * fillGrace)
	_, _, ok, err := srv.KV().Get([]byte("kbig00"))
	st := srv.TableStats()
	t.Logf("%d keys admitted; kbig00 committed: %v %v; incomplete: %v; %d/%d bytes used, %d free",
		len(a), ok, err, srv.TableHeader().Incomplete, st.BytesUsed, st.BytesArea, st.BytesFree)
	if v, err := c.Get(ctx, []byte("kbig00")); err != nil || !bytes.Equal(v, big) {
		t.Fatalf("kbig00 = %d bytes, %v", len(v), err)
	}
	lead.Stop()
	if err := lead.Start(); err != nil {
		t.Fatalf("restart with the same --table-mem: %v", err)
	}
}

// TestLeaderAdmissionAfterFailedRebuild: a leader whose region rebuild
// failed part way (the region holds only the keys walked before the
// failure, and the rest are in no missing set) must not admit writes
// against that partial region.
func TestLeaderAdmissionAfterFailedRebuild(t *testing.T) {
	skipShort(t)
	var f server.Faults
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: fillTableMem, ReuseGrace: fillGrace, Knobs: f.KnobsFor})
	lead := kvdtest.WaitLeader(t, nodes, 15*time.Second)
	srv := lead.Srv
	c := newPatientClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	for i := range 8 {
		if err := c.Put(ctx, []byte(fmt.Sprintf("kbig%02d", i)), valueFor(1024)); err != nil {
			t.Fatal(err)
		}
	}
	resume := f.PauseRepair() // its retries would hold the table lock nearly all the time
	f.FailRebuilds(0)         // a rebuild whose walk of Pebble fails (a read error)
	server.Rebuild(srv)
	wait.For(t, "the old records' space to clear", func() bool { return srv.TableStats().BytesLimbo == 0 })
	// PUTs until the leader refuses one, for any reason (a fix may refuse
	// them as unavailable while the region is partial).
	short, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), AttemptTimeout: time.Second, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	var a []string
	for i := 0; ; i++ {
		k := fmt.Sprintf("a%03d", i)
		if err := short.Put(ctx, []byte(k), valueFor(256)); err != nil {
			t.Logf("put %s: %v", k, err)
			break
		}
		a = append(a, k)
	}
	f.FailRebuilds(-1)
	resume()
	time.Sleep(20 * fillGrace) // the repair loop reruns the rebuild
	st := srv.TableStats()
	t.Logf("%d keys admitted against the partial region; incomplete: %v; %d/%d bytes used",
		len(a), srv.TableHeader().Incomplete, st.BytesUsed, st.BytesArea)
	lead.Stop()
	if err := lead.Start(); err != nil {
		t.Fatalf("restart with the same --table-mem: %v", err)
	}
}

// TestTxnAdmissionNeverOverfills: transactions are admitted like PUTs,
// with room reserved for every PUT of either branch, so concurrent
// transactions filling the table are refused with ErrNoSpace (applying
// nothing) before the leader's region has to refuse an applied write; and
// every reservation ends with its transaction.
func TestTxnAdmissionNeverOverfills(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: fillTableMem, ReuseGrace: fillGrace})
	lead := kvdtest.WaitLeader(t, nodes, 15*time.Second)
	c := newPatientClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	m := &fillModel{m: map[string][]byte{}}
	const workers = 8
	var refused atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 5))
			for i, fails := 0, 0; fails < 3; i++ {
				k1, k2 := fmt.Sprintf("t%d-%d-a", w, i), fmt.Sprintf("t%d-%d-b", w, i)
				v1 := bytes.Repeat([]byte{'a'}, mediumValue(r))
				v2 := bytes.Repeat([]byte{'b'}, smallValue(r))
				_, err := c.Txn(context.Background(), client.Txn{
					If:   []client.Cmp{client.KeyMissing([]byte(k1))},
					Then: []client.Op{client.OpPut([]byte(k1), v1), client.OpPut([]byte(k2), v2)},
					Else: []client.Op{client.OpPut([]byte(k2), v1)},
				})
				switch {
				case errors.Is(err, client.ErrNoSpace):
					fails++
					refused.Add(1)
					time.Sleep(fillGrace * 3 / 2)
				case err != nil:
					t.Errorf("txn %s: %v", k1, err)
					return
				default:
					fails = 0
					m.set(k1, v1)
					m.set(k2, v2)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	st := lead.Srv.TableStats()
	t.Logf("%d keys written by transactions, %d transactions refused", len(m.keys()), refused.Load())
	if refused.Load() == 0 || st.Refusals == 0 {
		t.Fatal("no transaction was refused: the table never filled")
	}
	if st.BytesReserved != 0 || st.SlotsHeld != 0 {
		t.Fatalf("reservations left after every transaction returned: %+v", st)
	}
	checkNoApplyMisses(t, nodes, lead)
	checkNodes(t, nodes, m)
}
