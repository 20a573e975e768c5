package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// benchClient starts a single node holding key "bench-key" and returns a
// client whose connection is already warm.
func benchClient(b *testing.B, value []byte, opts ...func(*client.Config)) *client.Client {
	b.Helper()
	nodes := kvdtest.StartCluster(b, 1, kvdtest.Options{})
	kvdtest.WaitLeader(b, nodes, 10*time.Second)
	cfg := client.Config{Endpoints: kvdtest.Endpoints(nodes)}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if err := c.Put(context.Background(), []byte("bench-key"), value); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Get(context.Background(), []byte("bench-key")); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkGetAppend is the one-sided GET path end to end over loopback TCP
// with a cached location (one READ round trip), appending into a reused
// buffer: it must not allocate.
func BenchmarkGetAppend(b *testing.B) {
	benchGetAppend(b, benchClient(b, make([]byte, 256)))
}

// BenchmarkGetAppendNoDeadline is BenchmarkGetAppend with a context that
// has no deadline: the client bounds the GET by RequestTimeout. Over TCP
// every READ waits for the network, so the timer is made each time (over
// RDMA a GET whose READs have completed when it looks makes none).
func BenchmarkGetAppendNoDeadline(b *testing.B) {
	c := benchClient(b, make([]byte, 256))
	key := []byte("bench-key")
	buf := make([]byte, 0, 512)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = c.GetAppend(ctx, buf[:0], key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetUncached is the two-round-trip GET (no location cache).
func BenchmarkGetUncached(b *testing.B) {
	benchGetAppend(b, benchClient(b, make([]byte, 256), func(cfg *client.Config) { cfg.CacheEntries = -1 }))
}

func benchGetAppend(b *testing.B, c *client.Client) {
	key := []byte("bench-key")
	buf := make([]byte, 0, 512)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = c.GetAppend(ctx, buf[:0], key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetRPC is the two-sided GET (ReadIndex RPC) for comparison.
func BenchmarkGetRPC(b *testing.B) {
	c := benchClient(b, make([]byte, 256))
	key := []byte("bench-key")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get(ctx, key, client.WithConsistency(client.ReadIndex)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPut is a replicated (single-node Raft, fsync'd) PUT.
func BenchmarkPut(b *testing.B) {
	c := benchClient(b, make([]byte, 256))
	key, val := []byte("bench-key"), make([]byte, 256)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Put(ctx, key, val); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetAfterPause is BenchmarkGetAppend with a pause of 200 µs
// (untimed) before each GET, as between the requests of one client that
// waits for each answer: the client's and the server's threads have gone
// to sleep, and the GET pays for waking them. Beside BenchmarkGetAppend
// it is what an idle host adds to one request.
func BenchmarkGetAfterPause(b *testing.B) {
	c := benchClient(b, make([]byte, 256))
	key := []byte("bench-key")
	buf := make([]byte, 0, 512)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for b.Loop() {
		b.StopTimer()
		time.Sleep(200 * time.Microsecond)
		b.StartTimer()
		var err error
		if buf, err = c.GetAppend(ctx, buf[:0], key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetAfterIdle is the first linearizable GET of a client that was
// idle for longer than its clock sample stays useful (2 s): a clock RPC,
// then the one-sided GET. Compare with BenchmarkGetAppend (steady state,
// no clock RPC on the GET's path).
func BenchmarkGetAfterIdle(b *testing.B) {
	c := benchClient(b, make([]byte, 256))
	key := []byte("bench-key")
	buf := make([]byte, 0, 512)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		client.AgeClockSamples(c, 3*time.Second)
		b.StartTimer()
		var err error
		if buf, err = c.GetAppend(ctx, buf[:0], key); err != nil {
			b.Fatal(err)
		}
	}
	if st := c.Stats(); st.ClockSyncs < uint64(b.N) {
		b.Fatalf("%d clock syncs for %d idle GETs", st.ClockSyncs, b.N)
	}
}

// BenchmarkGetMany7 reads 7 uncached keys with one GetMany (one batch: two
// READ round trips in all); BenchmarkGet7 reads the same keys with 7 Gets
// (two round trips each). The ratio of the two is what batching saves.
func BenchmarkGetMany7(b *testing.B) {
	c, keys := benchKeys(b, 7)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.GetMany(ctx, keys); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet7(b *testing.B) {
	c, keys := benchKeys(b, 7)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, k := range keys {
			if _, err := c.Get(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchKeys(b *testing.B, n int) (*client.Client, [][]byte) {
	c := benchClient(b, make([]byte, 256), func(cfg *client.Config) { cfg.CacheEntries = -1 })
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte{'k', byte('a' + i)}
		if err := c.Put(context.Background(), keys[i], make([]byte, 256)); err != nil {
			b.Fatal(err)
		}
	}
	return c, keys
}

// BenchmarkGetParallel is the gateway's shape: 64 goroutines sharing one
// client instance, each GETting a 256-byte value (one READ round trip,
// location cached), b.N GETs in all. Its CPU profile covers the client
// and the node serving the READs, both in this process.
func BenchmarkGetParallel(b *testing.B) {
	const workers = 64
	c := benchClient(b, make([]byte, 256))
	key := []byte("bench-key")
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 512)
			for next.Add(1) <= int64(b.N) {
				var err error
				if buf, err = c.GetAppend(ctx, buf[:0], key); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	st := c.Stats()
	b.ReportMetric(float64(st.Fallbacks)/float64(b.N), "fallbacks/op")
}
