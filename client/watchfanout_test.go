package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// BenchmarkWatchFanout measures the delay from a PUT's send to its event
// at each of many watchers of one key (etcd's watch-latency shape), on
// one connection and spread over several, with and without prev_kv: b.N
// puts at 100/s (-benchtime 100x), and the process's CPU (the node's
// included) per put. It fails only if a watcher misses an event.
func BenchmarkWatchFanout(b *testing.B) {
	nodes := kvdtest.StartCluster(b, 1, kvdtest.Options{})
	kvdtest.WaitLeader(b, nodes, 10*time.Second)
	for _, tc := range []struct {
		conns, perConn int
		prevKV         bool
	}{{1, 1, false}, {1, 100, false}, {10, 10, false}, {1, 1, true}, {1, 100, true}, {10, 10, true}} {
		b.Run(fmt.Sprintf("%dx%d/prevKV=%v", tc.conns, tc.perConn, tc.prevKV), func(b *testing.B) {
			lat, cpu := fanout(b, kvdtest.Endpoints(nodes), tc.conns, tc.perConn, b.N, tc.prevKV)
			slices.Sort(lat)
			q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
			b.ReportMetric(float64(q(.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(q(.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(float64((cpu/time.Duration(b.N)).Microseconds())/1000, "cpu-ms/put")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func fanout(t testing.TB, eps []string, conns, perConn, puts int, prevKV bool) (lat []time.Duration, cpu time.Duration) {
	var opts []client.WatchOption
	if prevKV {
		opts = append(opts, client.WithPrevKV())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := []byte("fanout-key")
	var mu sync.Mutex
	sent := make([]time.Time, puts+1)
	var wg sync.WaitGroup
	for range conns {
		c, err := client.New(client.Config{Endpoints: eps})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Put(ctx, []byte("warm"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		for range perConn {
			ch := c.Watch(ctx, key, opts...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < puts; {
					r, ok := <-ch
					if !ok {
						return
					}
					now := time.Now()
					for _, e := range r.Events {
						var i int
						fmt.Sscanf(string(e.Value), "%d", &i)
						mu.Lock()
						lat = append(lat, now.Sub(sent[i]))
						mu.Unlock()
						n++
					}
				}
			}()
		}
	}
	time.Sleep(500 * time.Millisecond) // every watch created
	pc, err := client.New(client.Config{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	cpu0 := cpuTime()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 1; i <= puts; i++ {
		<-tick.C
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		if err := pc.Put(client.WithAttemptTimeout(ctx, -1), key, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("watchers saw %d of %d events", len(lat), puts*conns*perConn)
	}
	return lat, cpuTime() - cpu0
}

// cpuTime is the CPU time this process has used (the node runs in it too).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
