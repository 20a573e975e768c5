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

// TestWatchFanoutLatency prints the delay from a PUT's send to its event
// at each of many watchers of one key (etcd's watch-latency shape), on one
// connection and spread over several. It prints numbers; it asserts only
// that every watcher sees every event.
func TestWatchFanoutLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	for _, tc := range []struct {
		conns, perConn int
		prevKV         bool
	}{{1, 1, false}, {1, 100, false}, {10, 10, false}, {1, 1, true}, {1, 100, true}, {10, 10, true}} {
		t.Run(fmt.Sprintf("%dx%d/prevKV=%v", tc.conns, tc.perConn, tc.prevKV), func(t *testing.T) {
			cpu0 := cpuTime()
			lat := fanout(t, kvdtest.Endpoints(nodes), tc.conns, tc.perConn, 100, tc.prevKV)
			cpu := cpuTime() - cpu0
			slices.Sort(lat)
			q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
			t.Logf("watchers=%d events=%d p50=%v p90=%v p99=%v max=%v cpu/put=%v", tc.conns*tc.perConn, len(lat), q(.5), q(.9), q(.99), lat[len(lat)-1], cpu/100)
		})
	}
}

func fanout(t *testing.T, eps []string, conns, perConn, puts int, prevKV bool) []time.Duration {
	var opts []client.WatchOption
	if prevKV {
		opts = append(opts, client.WithPrevKV())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := []byte("fanout-key")
	var mu sync.Mutex
	var lat []time.Duration
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
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 1; i <= puts; i++ {
		<-tick.C
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		if err := pc.Put(ctx, key, []byte(fmt.Sprint(i))); err != nil {
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
	return lat
}

// cpuTime is the CPU time this process has used (the node runs in it too).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
