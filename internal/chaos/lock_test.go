package chaos

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/client/concurrency"
)

// lockGuard is what the lock protects, in this process: who is inside,
// any second entrant, and the fencing tokens in the order holders entered.
type lockGuard struct {
	holder     atomic.Int64
	overlaps   atomic.Int64
	entries    atomic.Int64
	lastFence  atomic.Uint64
	staleFence atomic.Int64
	notAlive   atomic.Int64 // Lock returned but the session was no longer certainly alive
}

func (g *lockGuard) critical(id int64, fence uint64) {
	if !g.holder.CompareAndSwap(0, id) {
		g.overlaps.Add(1)
	}
	if prev := g.lastFence.Swap(fence); prev >= fence {
		g.staleFence.Add(1)
	}
	g.entries.Add(1)
	time.Sleep(5 * time.Millisecond)
	if !g.holder.CompareAndSwap(id, 0) {
		g.overlaps.Add(1)
	}
}

// TestLockUnderFaults: four clients contend for one lock (client/
// concurrency, leases and compare-and-swap) on a 3-process cluster while
// the leader is SIGKILLed and restarted, partitioned away and frozen. No
// two clients are ever inside at once, a holder enters only while its
// session is certainly alive, and each holder's fencing token is above
// the previous holder's.
func TestLockUnderFaults(t *testing.T) {
	pc := startCluster(t)
	var g lockGuard
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 1; i <= 4; i++ {
		c := newClient(t, pc.Endpoints(), client.Linearizable)
		wg.Add(1)
		go func(id int64) {
			defer wg.Done()
			runLocker(c, id, &g, stop)
		}(int64(i))
	}
	time.Sleep(time.Second)
	for _, f := range casFaults(t, pc) {
		t.Logf("fault: %s", f.name)
		before := g.entries.Load()
		f.do()
		time.Sleep(f.settle)
		t.Logf("critical sections during and after it: %d", g.entries.Load()-before)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d critical sections; %d times a Lock returned to a session no longer certainly alive", g.entries.Load(), g.notAlive.Load())
	switch {
	case g.overlaps.Load() != 0:
		t.Fatalf("%d overlapping critical sections", g.overlaps.Load())
	case g.staleFence.Load() != 0:
		t.Fatalf("%d holders entered with a fencing token not above the previous holder's", g.staleFence.Load())
	case g.entries.Load() < 10:
		t.Fatalf("only %d critical sections: the test checks too little", g.entries.Load())
	}
}

// runLocker takes the lock, runs the critical section, releases it, until
// stop; a session whose lease may be gone is replaced.
func runLocker(c *client.Client, id int64, g *lockGuard, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	var s *concurrency.Session
	defer func() {
		if s != nil {
			s.Close(ctxFor(5 * time.Second))
		}
	}()
	for ctx.Err() == nil {
		if s == nil {
			var err error
			if s, err = concurrency.NewSession(ctx, c, concurrency.Config{TTL: 5 * time.Second}); err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		m := concurrency.NewMutex(s, "lock")
		lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
		err := m.Lock(lctx)
		lcancel()
		switch {
		case errors.Is(err, concurrency.ErrSessionExpired):
			s = nil
			continue
		case err != nil:
			continue
		}
		if m.Held() {
			g.critical(id, m.Version())
		} else {
			g.notAlive.Add(1) // act as not holding it
		}
		if err := m.Unlock(ctxFor(10 * time.Second)); err != nil && !errors.Is(err, client.ErrConflict) {
			s.Close(ctxFor(5 * time.Second)) // maybe still held: end the lease
			s = nil
		}
	}
}
