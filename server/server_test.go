package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/server"
)

func newClient(t *testing.T, eps []string, level client.Consistency) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: eps, Consistency: level})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newPatientClient is newClient for tests about what the cluster stores, not
// how fast: a write's attempt may take 10 s before its outcome is unknown
// (a loaded machine can stall an fsync past the default second, and a
// write that times out cannot be retried), so only a real failure fails
// the test.
func newPatientClient(t *testing.T, eps []string, level client.Consistency) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: eps, Consistency: level, AttemptTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestCorruptRecordNeverServed flips a byte of a stored record in the
// leader's region, as a torn READ or a bad DIMM would: the client must not
// return the damaged value; it retries, then asks by RPC and gets the right
// one from the durable state.
func TestCorruptRecordNeverServed(t *testing.T) {
	// Out of place: the value is one run of bytes in the record area
	// (inline, it is spread over tagged words; TestInlineRegion's case).
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: 1 << 20, TableInline: server.TableInlineOff})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	want := []byte("the-true-value-0123456789")
	if err := c.Put(ctx, []byte("k"), want); err != nil {
		t.Fatal(err)
	}
	mem := n.Srv.Region().Bytes()
	i := bytes.Index(mem, want)
	if i < 0 {
		t.Fatal("value not found in the region")
	}
	mem[i+3] ^= 0xff // not through the table: the checksum no longer matches

	got, err := c.Get(ctx, []byte("k"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("get after corruption: %q, %v; want the durable value", got, err)
	}
	st := c.Stats()
	if st.Fallbacks != 1 || st.Retries["torn"] == 0 {
		t.Fatalf("stats %+v: want torn retries and one RPC fallback", st)
	}
}

// TestRegionIncompleteThenRepaired: a follower whose region is too small for
// what the leader accepted marks its region incomplete instead of serving
// wrong misses, answers correctly meanwhile, and repairs itself once space
// frees.
func TestRegionIncompleteThenRepaired(t *testing.T) {
	skipShort(t)
	small := 256 << 10
	// No arenas: the sizes below are of record areas.
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{
		TableMems: []int{4 << 20, 4 << 20, small}, ReuseGrace: 50 * time.Millisecond, TableInline: server.TableInlineOff,
	})
	if kvdtest.WaitLeader(t, nodes, 10*time.Second) == nodes[2] {
		// The small node must be a follower: restart it so another leads.
		nodes[2].Stop()
		kvdtest.WaitLeader(t, nodes[:2], 10*time.Second)
		if err := nodes[2].Start(); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, kvdtest.Endpoints(nodes[:2]), client.Linearizable)
	ctx := context.Background()
	val := strings.Repeat("v", 8000)
	const keys = 60 // ~480 KB: fits the leader, not the 256 KiB follower
	for i := 0; i < keys; i++ {
		if err := c.Put(ctx, []byte(fmt.Sprintf("k%02d", i)), []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	follower := nodes[2]
	wait.For(t, "follower region marked incomplete", func() bool { return follower.Srv.TableHeader().Incomplete })

	// Serializable reads of the follower: never a wrong "not found".
	fc := newClient(t, []string{follower.Addr}, client.Serializable)
	wait.For(t, "follower to apply everything", func() bool {
		return follower.Srv.Status().Applied >= nodes[0].Srv.Status().Applied &&
			follower.Srv.Status().Applied >= nodes[1].Srv.Status().Applied
	})
	for i := 0; i < keys; i++ {
		v, err := fc.Get(ctx, []byte(fmt.Sprintf("k%02d", i)))
		if err != nil || len(v) != len(val) {
			t.Fatalf("k%02d from the incomplete follower: %d bytes, %v", i, len(v), err)
		}
	}
	if fc.Stats().RPCGets == 0 {
		t.Fatal("no GET went to RPC, yet the region cannot hold every key")
	}
	// The region is too small for the data, not cut up: the repair loop
	// must not rebuild it over and over (a repack, internal/mirror) while it
	// waits for room. Ten grace periods give it the chance to.
	time.Sleep(500 * time.Millisecond)
	if n := follower.Srv.TableStats().Repacks; n != 0 {
		t.Fatalf("%d repacks of a region too small for the data", n)
	}
	// Free space; the repair loop puts the missing keys back.
	for i := 0; i < keys-20; i++ {
		if err := c.Delete(ctx, []byte(fmt.Sprintf("k%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "follower region repaired", func() bool { return !follower.Srv.TableHeader().Incomplete })
	before := fc.Stats().RPCGets
	for i := keys - 20; i < keys; i++ {
		if _, err := fc.Get(ctx, []byte(fmt.Sprintf("k%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fc.Get(ctx, []byte("k00")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("deleted key: %v", err)
	}
	if n := fc.Stats().RPCGets - before; n != 0 {
		t.Fatalf("%d GETs still needed RPC after the repair", n)
	}
}

// TestCloseUnderLoad closes a node while clients hammer it: no panic, no
// race (run with -race), and clients get errors, not hangs.
func TestCloseUnderLoad(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	var wg sync.WaitGroup
	var stopped atomic.Bool
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if stopped.Load() && i%20 != 0 {
					continue // a few calls after the stop are enough; each waits out its timeout
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				k := []byte(fmt.Sprintf("w%d-%d", w, i%5))
				if w%2 == 0 {
					c.Put(ctx, k, []byte("v"))
				} else {
					c.Get(ctx, k, client.WithConsistency(client.ReadIndex))
				}
				cancel()
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	nodes[0].Stop()
	stopped.Store(true)
	wg.Wait()
}
