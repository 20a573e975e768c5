//go:build rdma

package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// RDMA scenarios beyond TestRDMACluster, each on its own 3-node cluster of
// kvd processes over RC queue pairs (steps 32, 33 and 34 in
// scripts/rdmavm/steps run them): restart and redial, values up to 1 MiB, a
// snapshot installed over the RDMA peer transport. The partition scenario
// is in rdma_partition_test.go (step 35).

// TestRDMARestartRedial kills a follower, then the leader, with SIGKILL and
// restarts each from its data directory. While a node is down the cluster
// keeps taking writes and serving linearizable one-sided GETs. The restarted
// node registers a new table region: its hello names a new rkey and its
// header a new generation. A client pinned to that node, whose connection
// and cached locations point at the dead process's region, must redial and
// read every acknowledged write one-sided from the new region, byte-exact.
func TestRDMARestartRedial(t *testing.T) {
	pc := scenCluster(t, 7511)
	tr := freezeTransport(t)
	c := scenClient(t, tr, pc.Endpoints(), client.Linearizable)
	scenLeader(t, c, pc)

	acked := map[string][]byte{}
	var last string // the last key written
	retried := 0
	put := func(prefix string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			k := fmt.Sprintf("%s-%03d", prefix, i)
			v := scenValue(k, 64+37*i%700)
			retried += scenPut(t, c, k, v)
			acked[k], last = v, k
		}
	}
	put("start", 20)

	for _, role := range []string{"follower", "leader"} {
		l := scenLeader(t, c, pc)
		p := l
		if role == "follower" {
			p = others(pc, l)[0]
		}
		pinned := scenClient(t, tr, []string{p.Addr}, client.Serializable)
		scenSettle(t, pinned, last, acked[last])
		scenCheck(t, pinned, acked, "node "+fmt.Sprint(p.ID)+" before the kill", 0.9)
		d1, h1 := rdmaRegionOf(t, tr, p.Addr)

		p.Kill()
		t.Logf("%s: killed node %d (region %v, generation %#x)", role, p.ID, d1, h1.Generation)
		if _, err := pinned.Get(ctxFor(3*time.Second), []byte(last)); err == nil {
			t.Fatalf("%s: a GET pinned to the killed node %d succeeded", role, p.ID)
		}
		put(role+"-down", 20) // the majority goes on
		scenCheck(t, c, acked, "the survivors while node "+fmt.Sprint(p.ID)+" is down", 0.5)

		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		d2, h2 := rdmaRegionOfWithin(t, tr, p.Addr, 30*time.Second)
		t.Logf("%s: restarted node %d (region %v, generation %#x)", role, p.ID, d2, h2.Generation)
		if d2.Key == d1.Key {
			t.Errorf("%s: node %d's region has the same rkey %#x after the restart", role, p.ID, d2.Key)
		}
		if h2.Generation == h1.Generation {
			t.Errorf("%s: node %d's region has the same generation %#x after the restart", role, p.ID, h2.Generation)
		}
		scenSettle(t, pinned, last, acked[last]) // it caught up through raft
		scenCheck(t, pinned, acked, fmt.Sprintf("the pinned client after node %d restarted", p.ID), 0.9)
		t.Logf("%s: the pinned client read all %d keys one-sided from the new region; its one-sided retries since it was created: %v",
			role, len(acked), pinned.Stats().Retries)
		put(role+"-up", 10)
		scenCheck(t, c, acked, "the cluster after the restart", 0.5)
	}
	scenSummary(t, "RDMAVM-SCENARIO: restart: follower and leader SIGKILLed and restarted; %d acknowledged keys read one-sided "+
		"from each restarted node's new region (new rkey and generation); %d PUT attempts failed and were retried\n", len(acked), retried)
}

// TestRDMALargeValues PUTs (SEND/RECV, split into 16 KiB fragments) values
// of sizes around the transport's fragment boundaries, the 256 KiB READ
// staging slot and up to kvd's 1 MiB limit, then reads each back
// byte-exact: linearizable one-sided from the leader (no RPC), by ReadIndex
// RPC (a multi-fragment response), and serializable one-sided from each
// node (so the value was replicated over the RDMA peer transport). The
// serializable GETs must all be one-sided; linearizable ones may fall back
// to RPC when the VM's load delays the lease (counted, not failed). A value
// one byte over the limit is refused. Then four 1 MiB PUTs and one-sided
// GETs run concurrently on one client each.
//
// The VM's emulated CPU, shared with other work, is slow: a 1 MiB one-sided
// GET has taken 2 s there, and a client rejects a READ that took longer
// than the region's reuse grace period (it cannot prove the record was not
// reused meanwhile), so this cluster runs with a 10 s grace. A 1 MiB entry
// there has held up heartbeats past the default 1 s election timeout, so it
// ticks every 200 ms (elections after 2 s); a PUT that fails all the same
// (a leader change) is retried with the same value.
func TestRDMALargeValues(t *testing.T) {
	pc := scenCluster(t, 7521, "--table-mem", "64MiB", "--reuse-grace", "10s", "--tick", "200ms")
	tr := freezeTransport(t)
	c := scenClient(t, tr, pc.Endpoints(), client.Linearizable)
	l := scenLeader(t, c, pc)
	ri := scenClient(t, tr, pc.Endpoints(), client.ReadIndex)
	var pinned []*client.Client // the first leader's, then the followers'
	var pinnedID []uint64
	for _, p := range append([]*kvdtest.Proc{l}, others(pc, l)...) {
		pinned = append(pinned, scenClient(t, tr, []string{p.Addr}, client.Serializable))
		pinnedID = append(pinnedID, p.ID)
	}
	rpcGets := func() (n uint64) {
		for _, p := range pinned {
			n += p.Stats().RPCGets
		}
		return n
	}
	rpcBefore := rpcGets()

	const (
		frag  = 16<<10 - 16 // payload of one fragment (rdma.Config.BufSize less its header)
		reqHd = wire.RequestHeaderLen
		rspHd = wire.ResponseHeaderLen
		keyN  = 8         // every key below is 8 bytes
		slot  = 256 << 10 // rdma.Config.ReadSlotSize
		recHd = table.RecordHeaderSize
	)
	sizes := []int{
		1,
		frag - reqHd - keyN - 1, frag - reqHd - keyN, frag - reqHd - keyN + 1, // a PUT of exactly one fragment
		frag - rspHd, frag - rspHd + 1, // an RPC GET's response of one fragment
		2*frag - reqHd - keyN, 2*frag - reqHd - keyN + 1,
		slot - recHd - keyN - 8, slot - recHd - keyN, slot - recHd - keyN + 1, // a record of one READ slot
		512 << 10,
		table.MaxValue - 1, table.MaxValue,
	}
	var putMiB, getMiB time.Duration // of the 1 MiB value
	retried := 0
	for _, n := range sizes {
		k := fmt.Sprintf("v%07d", n)
		v := scenValue(k, n)
		start := time.Now()
		retried += scenPut(t, c, k, v)
		putTook := time.Since(start)
		got, err := c.Get(ctxFor(30*time.Second), []byte(k))
		scenSame(t, fmt.Sprintf("linearizable GET of %d bytes", n), got, err, v)
		got, err = ri.Get(ctxFor(30*time.Second), []byte(k))
		scenSame(t, fmt.Sprintf("ReadIndex GET of %d bytes", n), got, err, v)
		for i, p := range pinned {
			scenSettle(t, p, k, v)
			start = time.Now()
			got, err := p.Get(ctxFor(30*time.Second), []byte(k))
			if i == 0 && n == table.MaxValue {
				putMiB, getMiB = putTook, time.Since(start)
			}
			scenSame(t, fmt.Sprintf("serializable GET of %d bytes from node %d", n, pinnedID[i]), got, err, v)
		}
	}
	if n := rpcGets() - rpcBefore; n > 0 {
		t.Errorf("%d serializable GETs fell back to RPC; want all one-sided", n)
	}
	if err := c.Put(ctxFor(30*time.Second), []byte("too-big"), make([]byte, table.MaxValue+1)); !errors.Is(err, client.ErrValueTooLarge) {
		t.Errorf("PUT of MaxValue+1 bytes: %v, want ErrValueTooLarge", err)
	}
	// The limit did not break the client: the largest value still reads.
	k := fmt.Sprintf("v%07d", table.MaxValue)
	got, err := c.Get(ctxFor(30*time.Second), []byte(k))
	scenSame(t, "GET after the refused PUT", got, err, scenValue(k, table.MaxValue))

	// Concurrent 1 MiB messages and READs on shared connections.
	const par = 4
	vals := make([][]byte, par)
	var wg sync.WaitGroup
	errs := make([]error, par)
	for i := range par {
		vals[i] = scenValue(fmt.Sprintf("par-%d", i), table.MaxValue)
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(time.Minute)
			for { // as scenPut: a PUT that failed (a leader change) may be retried with the same value
				errs[i] = c.Put(ctxFor(30*time.Second), []byte(fmt.Sprintf("par-%d", i)), vals[i])
				if errs[i] == nil || time.Now().After(deadline) {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent 1 MiB PUT %d: %v", i, err)
		}
	}
	// One client per GET, each pinned to a node in turn (serializable, so
	// each is one-sided: no lease involved), all reading at once.
	var readers []*client.Client
	for i := range par {
		readers = append(readers, scenClient(t, tr, []string{pc.Procs[i%len(pc.Procs)].Addr}, client.Serializable))
		scenSettle(t, readers[i], fmt.Sprintf("par-%d", i), vals[i])
	}
	gots := make([][]byte, par)
	for i := range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gots[i], errs[i] = readers[i].Get(ctxFor(60*time.Second), []byte(fmt.Sprintf("par-%d", i)))
		}()
	}
	wg.Wait()
	for i := range par {
		scenSame(t, fmt.Sprintf("concurrent 1 MiB GET %d", i), gots[i], errs[i], vals[i])
		if st := readers[i].Stats(); st.RPCGets != 0 {
			t.Errorf("concurrent 1 MiB GET %d (or the wait before it) fell back to RPC (retries %v)", i, st.Retries)
		}
	}
	lin := c.Stats()
	scenSummary(t, "RDMAVM-SCENARIO: large values: %d sizes from 1 B to %d B (fragment and READ-slot boundaries) PUT and read back "+
		"byte-exact one-sided, by ReadIndex and from both followers; %d concurrent 1 MiB PUTs and one-sided GETs; "+
		"1 MiB PUT took %v, its one-sided GET %v (emulated CPU); %d PUT attempts failed and were retried; "+
		"linearizable GETs: %d one-sided, %d by RPC\n",
		len(sizes), table.MaxValue, par, putMiB.Round(time.Millisecond), getMiB.Round(time.Millisecond), retried, lin.OneSided, lin.RPCGets)
}

// TestRDMASnapshotInstall stops a follower, writes enough (with
// --snapshot-count 64) that the leader compacts its log past the follower's
// index, and restarts it: the leader must send a snapshot (over 1 MiB, so
// several chunks) over the RDMA peer transport, and the follower must
// install it (both say so in their logs), reach the leader's applied index,
// and serve every key one-sided from its rebuilt region, byte-exact, and
// no key that was never written.
func TestRDMASnapshotInstall(t *testing.T) {
	pc := scenCluster(t, 7531, "--snapshot-count", "64", "--log-level", "info")
	tr := freezeTransport(t)
	c := scenClient(t, tr, pc.Endpoints(), client.Linearizable)
	l := scenLeader(t, c, pc)
	f := others(pc, l)[0]

	acked := map[string][]byte{}
	put := func(prefix string, n, size int) string {
		t.Helper()
		var k string
		for i := 0; i < n; i++ {
			k = fmt.Sprintf("%s-%04d", prefix, i)
			v := scenValue(k, size)
			scenPut(t, c, k, v)
			acked[k] = v
		}
		return k
	}
	put("early", 30, 512)
	l = scenLeader(t, c, pc) // again: the VM's load may have changed it
	f = others(pc, l)[0]
	f.Kill()
	t.Logf("killed follower %d; leader %d", f.ID, l.ID)
	last := put("late", 200, 6000) // 1.2 MB: more than one 1 MiB snapshot chunk
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	var want uint64 // what the others have applied (the leader may have changed under the load)
	for _, p := range others(pc, f) {
		want = max(want, scenStatus(c, p).Applied)
	}
	deadline := time.Now().Add(60 * time.Second)
	for scenStatus(c, f).Applied < want {
		if time.Now().After(deadline) {
			t.Fatalf("restarted follower %d applied %d, the others %d", f.ID, scenStatus(c, f).Applied, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(f.Logs(), "installed snapshot from leader") {
		t.Errorf("follower %d caught up without installing a snapshot; its log:\n%s", f.ID, scenTail(f.Logs(), 30))
	}
	// Whichever node led when it came back sent the snapshot.
	sent := fmt.Sprintf("peer=%d", f.ID)
	var sender uint64
	for _, p := range others(pc, f) {
		for _, line := range strings.Split(p.Logs(), "\n") {
			if strings.Contains(line, "snapshot sent") && strings.Contains(line, sent) {
				sender = p.ID
			}
		}
	}
	if sender == 0 {
		t.Errorf("no node logged a snapshot sent to %d; leader %d's log:\n%s", f.ID, l.ID, scenTail(l.Logs(), 30))
	}
	only := scenClient(t, tr, []string{f.Addr}, client.Serializable)
	scenSettle(t, only, last, acked[last])
	scenCheck(t, only, acked, fmt.Sprintf("follower %d after the snapshot", f.ID), 0.9)
	if _, err := only.Get(ctxFor(5*time.Second), []byte("never-written")); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("never-written key on follower %d: %v, want ErrNotFound", f.ID, err)
	}
	// It goes on replicating after the install.
	last = put("after", 20, 100)
	scenSettle(t, only, last, acked[last])
	scenCheck(t, only, acked, fmt.Sprintf("follower %d after further writes", f.ID), 0.9)
	scenSummary(t, "RDMAVM-SCENARIO: snapshot: follower %d installed a snapshot sent over rdma by node %d and serves all %d keys one-sided\n",
		f.ID, sender, len(acked))
}

// scenSummary prints the test's RDMAVM-SCENARIO: line, only if it passed
// (the line states what was shown).
func scenSummary(t *testing.T, format string, args ...any) {
	t.Helper()
	if !t.Failed() {
		fmt.Printf(format, args...)
	}
}

// scenCluster starts three kvd processes over RDMA on ports base to base+2
// (each test its own, so that none waits for the previous cluster's ports
// to be released); extra flags follow the defaults (a repeated flag takes
// its last value). Regions have arenas (--table-inline 144), so small
// values are read inline over RDMA; rdmaCluster's have none. Their grace
// period is the record area's (1s), not 100ms: a GET resting on arena
// bytes must finish within half of it, and the VM's emulated CPU stalls
// for tens of milliseconds under load (a slow GET retries, which the
// scenarios would count against the one-sided path). If the test fails,
// the nodes' last log lines are printed.
func scenCluster(t *testing.T, base int, extra ...string) *kvdtest.ProcCluster {
	t.Helper()
	pc := kvdtest.StartProcClusterOpts(t, procBin(t), 3, kvdtest.ProcOptions{
		Transport: "rdma", Host: rdmaHost(t), BasePort: base,
		Extra: append([]string{"--rdma-device", os.Getenv("KVD_RDMA_DEVICE"), "--table-mem", "16MiB", "--table-inline", "144", "--table-inline-grace", "1s", "--log-level", "info"}, extra...),
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range pc.Procs {
				t.Logf("node %d's last log lines:\n%s", p.ID, scenTail(p.Logs(), 25))
			}
		}
	})
	return pc
}

// scenLeader waits for a leader with a valid lease, as rdmaLeader does, but
// longer (the VM's CPU is shared with other work) and saying what each node
// answered last if none appears.
func scenLeader(t *testing.T, c *client.Client, pc *kvdtest.ProcCluster) *kvdtest.Proc {
	t.Helper()
	last := map[uint64]string{}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range pc.Procs {
			if !p.Running() {
				continue
			}
			st, err := c.Status(ctxFor(3*time.Second), p.Addr)
			if err == nil && st.IsLeader && st.LeaseValid {
				if st.Transport != "rdma" {
					t.Fatalf("node %d runs transport %q, want rdma", p.ID, st.Transport)
				}
				return p
			}
			last[p.ID] = fmt.Sprintf("%+v, %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no leader with a valid lease over RDMA within 60s; last answers: %v", last)
	return nil
}

// scenClient is a client of tr (shared by the test's clients, closed after
// them) at the given level. Its attempt timeout allows for the VM's
// emulated CPU: a 1 MiB PUT replicated to two followers takes more than
// the default second there.
func scenClient(t *testing.T, tr transport.Transport, eps []string, level client.Consistency) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: eps, Transport: tr, Consistency: level, DialTimeout: 2 * time.Second,
		AttemptTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// scenPut writes key=v until a PUT is acknowledged (a failed PUT may have
// been applied; writing the same value again is harmless) and returns how
// many attempts failed. It fails the test after a minute.
func scenPut(t *testing.T, c *client.Client, key string, v []byte) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for failed := 0; ; failed++ {
		err := c.Put(ctxFor(30*time.Second), []byte(key), v)
		if err == nil {
			return failed
		}
		if time.Now().After(deadline) || errors.Is(err, client.ErrValueTooLarge) {
			t.Fatalf("put %s (%d bytes): %v", key, len(v), err)
		}
		t.Logf("put %s (%d bytes) failed, retrying: %v", key, len(v), err)
		time.Sleep(200 * time.Millisecond)
	}
}

// scenValue is n pseudo-random bytes determined by key, so that a value
// with a fragment misplaced, repeated or left out does not compare equal.
func scenValue(key string, n int) []byte {
	var seed uint64
	for _, b := range []byte(key) {
		seed = seed*131 + uint64(b)
	}
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	v := make([]byte, n)
	for i := 0; i < n; i += 8 {
		w := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			v[i+j] = byte(w >> (8 * j))
		}
	}
	return v
}

// scenSame fails the test unless got (err nil) equals want.
func scenSame(t *testing.T, what string, got []byte, err error, want []byte) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: got %d bytes, want %d; first difference at byte %d", what, len(got), len(want), i)
	}
}

// scenCheck GETs every key of want through c and compares the values byte
// for byte. At least minOneSided of the GETs (a fraction) must have been
// answered one-sided, without RPC. A client that READs a region it cannot
// read (a dead process's rkey, a stale descriptor) answers none that way; a
// few may fall back to RPC legitimately when the VM's shared CPU stalls a
// node (a lease renewed late, a READ slower than the reuse grace period).
func scenCheck(t *testing.T, c *client.Client, want map[string][]byte, who string, minOneSided float64) {
	t.Helper()
	before := c.Stats()
	for k, v := range want {
		got, err := c.Get(ctxFor(20*time.Second), []byte(k))
		scenSame(t, fmt.Sprintf("%s: GET %s", who, k), got, err, v)
	}
	after := c.Stats()
	one, rpc := after.OneSided-before.OneSided, after.RPCGets-before.RPCGets
	if float64(one) < minOneSided*float64(len(want)) {
		t.Fatalf("%s: only %d of %d GETs one-sided (want at least %.0f%%), %d by RPC; retries %v", who, one, len(want),
			100*minOneSided, rpc, after.Retries)
	}
	if rpc > 0 {
		t.Logf("%s: %d of %d GETs one-sided, %d by RPC; retries %v", who, one, len(want), rpc, after.Retries)
	}
}

// scenSettle waits until c reads key's value v (nil: not found): the node
// it reads from has applied that write (and, written in order, every
// earlier one).
func scenSettle(t *testing.T, c *client.Client, key string, v []byte) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.Get(ctxFor(5*time.Second), []byte(key))
		if (err == nil && v != nil && bytes.Equal(got, v)) || (v == nil && errors.Is(err, client.ErrNotFound)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never returned its acknowledged value: %d bytes, %v", key, len(got), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func scenStatus(c *client.Client, p *kvdtest.Proc) client.NodeStatus {
	st, _ := c.Status(ctxFor(2*time.Second), p.Addr)
	return st
}

func scenTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// rdmaRegionOf asks the node at addr for its region descriptor (the hello
// every client starts with) and READs the region's header through it.
func rdmaRegionOf(t *testing.T, tr transport.Transport, addr string) (transport.Descriptor, table.Header) {
	t.Helper()
	d, h, err := regionOf(tr, addr)
	if err != nil {
		t.Fatalf("region of %s: %v", addr, err)
	}
	return d, h
}

// rdmaRegionOfWithin retries rdmaRegionOf while the node starts.
func rdmaRegionOfWithin(t *testing.T, tr transport.Transport, addr string, within time.Duration) (transport.Descriptor, table.Header) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		d, h, err := regionOf(tr, addr)
		if err == nil {
			return d, h
		}
		if time.Now().After(deadline) {
			t.Fatalf("region of %s: %v", addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func regionOf(tr transport.Transport, addr string) (transport.Descriptor, table.Header, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := tr.Dial(ctx, addr)
	if err != nil {
		return transport.Descriptor{}, table.Header{}, err
	}
	defer conn.Close()
	if err := conn.Send(ctx, wire.AppendRequest(nil, &wire.Request{Op: wire.OpHello, ID: 1})); err != nil {
		return transport.Descriptor{}, table.Header{}, err
	}
	b, err := conn.Recv(ctx, nil)
	if err != nil {
		return transport.Descriptor{}, table.Header{}, err
	}
	var resp wire.Response
	if err := wire.DecodeResponse(b, &resp); err != nil {
		return transport.Descriptor{}, table.Header{}, err
	}
	if resp.Status != wire.StatusOK {
		return transport.Descriptor{}, table.Header{}, fmt.Errorf("hello: status %d: %s", resp.Status, resp.Value)
	}
	var hello wire.Hello
	if err := wire.DecodeHello(resp.Value, &hello); err != nil {
		return transport.Descriptor{}, table.Header{}, err
	}
	d := transport.Descriptor{Addr: hello.RegionAddr, Len: hello.RegionLen, Key: hello.RegionKey}
	hdr := make([]byte, table.HeaderSize)
	if err := conn.Read(ctx, []transport.ReadOp{{Remote: d, Dst: hdr}}); err != nil {
		return d, table.Header{}, fmt.Errorf("READ of the header: %w", err)
	}
	h, err := table.ParseHeader(hdr)
	return d, h, err
}
