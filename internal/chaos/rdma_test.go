//go:build rdma

package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/transport/rdma"
)

// These tests need a real RDMA device: scripts/rdmavm runs them inside a
// Soft-RoCE VM, where KVD_RDMA_HOST is the rxe device's address. Without it
// they fail loudly rather than skip, because a build with -tags rdma is only
// ever run where RDMA is expected.
func rdmaHost(t *testing.T) string {
	h := os.Getenv("KVD_RDMA_HOST")
	if h == "" {
		t.Fatal("KVD_RDMA_HOST is not set: run these tests with make test-rdma (they need an RDMA device)")
	}
	return h
}

func rdmaClient(t *testing.T, eps []string, level client.Consistency) *client.Client {
	t.Helper()
	tr, err := rdma.New(rdma.Config{Device: os.Getenv("KVD_RDMA_DEVICE")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Config{Endpoints: eps, Transport: tr, Consistency: level, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); tr.Close() })
	return c
}

func rdmaCluster(t *testing.T) *kvdtest.ProcCluster {
	pc := kvdtest.StartProcClusterOpts(t, procBin(t), 3, kvdtest.ProcOptions{
		Transport: "rdma", Host: rdmaHost(t),
		Extra: []string{"--rdma-device", os.Getenv("KVD_RDMA_DEVICE"), "--table-mem", "16MiB"},
	})
	return pc
}

func rdmaLeader(t *testing.T, c *client.Client, pc *kvdtest.ProcCluster) *kvdtest.Proc {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range pc.Procs {
			if !p.Running() {
				continue
			}
			st, err := c.Status(ctxFor(time.Second), p.Addr)
			if err == nil && st.IsLeader && st.LeaseValid {
				if st.Transport != "rdma" {
					t.Fatalf("node %d runs transport %q, want rdma", p.ID, st.Transport)
				}
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no leader over RDMA within 30s")
	return nil
}

// TestRDMACluster: three kvd processes replicate over RC queue pairs; a
// client PUTs by SEND/RECV and GETs by one-sided READ; the leader is killed
// with SIGKILL and every key still reads back, and writes go on.
func TestRDMACluster(t *testing.T) {
	pc := rdmaCluster(t)
	c := rdmaClient(t, pc.Endpoints(), client.Linearizable)
	rdmaLeader(t, c, pc)
	const n = 100
	for i := 0; i < n; i++ {
		if err := c.Put(ctxFor(10*time.Second), []byte(fmt.Sprintf("r%03d", i)), []byte(fmt.Sprintf("v%03d", i))); err != nil {
			t.Fatalf("put %d over rdma: %v", i, err)
		}
	}
	before := c.Stats()
	for i := 0; i < n; i++ {
		v, err := c.Get(ctxFor(10*time.Second), []byte(fmt.Sprintf("r%03d", i)))
		if err != nil || string(v) != fmt.Sprintf("v%03d", i) {
			t.Fatalf("get r%03d over rdma: %q, %v", i, v, err)
		}
	}
	after := c.Stats()
	if rpc := after.RPCGets - before.RPCGets; rpc != 0 {
		t.Errorf("%d of %d GETs fell back to RPC; want all one-sided", rpc, n)
	}
	rounds := after.OneSidedRounds - before.OneSidedRounds
	t.Logf("%d one-sided GETs over rdma took %d READ round trips (%.2f per GET)", n, rounds, float64(rounds)/n)
	if rounds < n || rounds > 2*n {
		t.Errorf("round trips %d for %d GETs, want between %d and %d", rounds, n, n, 2*n)
	}

	l := rdmaLeader(t, c, pc)
	l.Kill()
	t.Logf("killed leader %d", l.ID)
	for i := 0; i < n; i++ {
		v, err := c.Get(ctxFor(20*time.Second), []byte(fmt.Sprintf("r%03d", i)))
		if err != nil || string(v) != fmt.Sprintf("v%03d", i) {
			t.Fatalf("after leader kill, get r%03d: %q, %v", i, v, err)
		}
	}
	if err := c.Put(ctxFor(20*time.Second), []byte("after-kill"), []byte("ok")); err != nil {
		t.Fatalf("put after leader kill: %v", err)
	}
	nl := rdmaLeader(t, c, pc)
	if nl == l {
		t.Fatal("the killed node is still reported leader")
	}
	t.Logf("new leader %d; all %d keys intact, writes accepted", nl.ID, n)
}

// TestRDMALatencyProbe measures kvd GET (one-sided, cached location and
// uncached) and PUT latency over RDMA, and prints them next to perftest's
// ib_read_lat / ib_send_lat from the same VM run (KVD_PERF_DIR holds their
// output) as ratios.
func TestRDMALatencyProbe(t *testing.T) {
	pc := rdmaCluster(t)
	c := rdmaClient(t, pc.Endpoints(), client.Linearizable)
	rdmaLeader(t, c, pc)
	uncached := rdmaClientNoCache(t, pc.Endpoints())
	ctx := context.Background()
	key, val := []byte("probe"), make([]byte, 32)
	if err := c.Put(ctx, key, val); err != nil {
		t.Fatal(err)
	}
	const iters = 300
	measure := func(f func() error) time.Duration {
		ds := make([]time.Duration, 0, iters)
		for i := 0; i < iters; i++ {
			start := time.Now()
			if err := f(); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	buf := make([]byte, 0, 64)
	get := measure(func() error { var err error; buf, err = c.GetAppend(ctx, buf[:0], key); return err })
	get2 := measure(func() error { var err error; buf, err = uncached.GetAppend(ctx, buf[:0], key); return err })
	put := measure(func() error { return c.Put(ctx, key, val) })
	readLat, sendLat := perftestTypical(t, "ib_read_lat"), perftestTypical(t, "ib_send_lat")
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	fmt.Printf("RDMAVM-LATENCY: kvd GET (1 round trip, cached) p50 %.1f us = %.2f x ib_read_lat (%.1f us)\n", us(get), us(get)/readLat, readLat)
	fmt.Printf("RDMAVM-LATENCY: kvd GET (2 round trips) p50 %.1f us = %.2f x ib_read_lat\n", us(get2), us(get2)/readLat)
	fmt.Printf("RDMAVM-LATENCY: kvd PUT (3-node Raft, fsync) p50 %.1f us = %.2f x ib_send_lat (%.1f us)\n", us(put), us(put)/sendLat, sendLat)
}

func rdmaClientNoCache(t *testing.T, eps []string) *client.Client {
	tr, err := rdma.New(rdma.Config{Device: os.Getenv("KVD_RDMA_DEVICE")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Config{Endpoints: eps, Transport: tr, CacheEntries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); tr.Close() })
	return c
}

// perftestTypical reads the "t_typical" column of a perftest latency run's
// result row (message size 2) from KVD_PERF_DIR/<name>.client.
func perftestTypical(t *testing.T, name string) float64 {
	dir := os.Getenv("KVD_PERF_DIR")
	if dir == "" {
		t.Fatal("KVD_PERF_DIR is not set: the latency probe runs after the perftest step in the RDMA VM")
	}
	f, err := os.Open(filepath.Join(dir, name+".client"))
	if err != nil {
		t.Fatalf("perftest output for %s: %v", name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 9 && fs[0] == "2" {
			if v, err := strconv.ParseFloat(fs[4], 64); err == nil && v > 0 {
				return v
			}
		}
	}
	t.Fatalf("no result row in %s output", name)
	return 0
}
