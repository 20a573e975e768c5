package etcdapi_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvd-project/kvd/internal/etcdapi"
)

// BenchmarkWatchFanout measures the delay from a PUT's send to its event
// at each of many clientv3 watchers of one key, the shape of etcd's
// benchmark watch-latency: streams (each its own clientv3 client) times
// watchers per stream, b.N puts at 100/s (-benchtime 100x), and the
// process's CPU (the node's included) per put. It fails only if a
// watcher misses an event.
func BenchmarkWatchFanout(b *testing.B) {
	e := start(b, 1, etcdapi.Config{})
	for _, tc := range []struct{ streams, perStream int }{{1, 1}, {1, 100}, {10, 10}} {
		b.Run(fmt.Sprintf("%dx%d", tc.streams, tc.perStream), func(b *testing.B) {
			lat, cpu := etcdFanout(b, e, tc.streams, tc.perStream, b.N)
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

func etcdFanout(t testing.TB, e *env, streams, perStream, puts int) (lat []time.Duration, cpu time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := fmt.Sprintf("fanout-%d-%d", streams, perStream)
	var mu sync.Mutex
	sent := make([]time.Time, puts+1)
	var wg sync.WaitGroup
	for range streams {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for range perStream {
			ch := c.Watch(ctx, key)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < puts; {
					r, ok := <-ch
					if !ok {
						return
					}
					now := time.Now()
					for _, ev := range r.Events {
						var i int
						fmt.Sscanf(string(ev.Kv.Value), "%d", &i)
						mu.Lock()
						lat = append(lat, now.Sub(sent[i]))
						mu.Unlock()
						n++
					}
				}
			}()
		}
	}
	time.Sleep(time.Second) // every watch created
	cpu0 := cpuTime()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 1; i <= puts; i++ {
		<-tick.C
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		if _, err := e.etcd.Put(ctx, key, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("watchers saw %d of %d events", len(lat), puts*streams*perStream)
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
