package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestAvailabilityFrozenLeader measures what a client sees when the leader
// stalls: one client PUTs and GETs (linearizable, the default) in a loop
// against a 3-node cluster while the leader is frozen for 10s, its region
// still answering one-sided READs. The client must move to the new leader
// by itself: the longest window without a successful operation must stay
// under 3s (the acceptance bound: an election plus the client's
// AttemptTimeout, nowhere near the freeze's 10s). Each GET must return the
// last acknowledged PUT's value (or that of a PUT that failed as maybe
// applied): no stale read counts as a success.
func TestAvailabilityFrozenLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	const freeze, bound = 10 * time.Second, 3 * time.Second
	pc := kvdtest.StartProcCluster(t, procBin(t), 3)
	leaderOf(t, pc, 20*time.Second)
	c := newClient(t, pc.Endpoints(), client.Linearizable)

	var mu sync.Mutex
	var okAt, putAt []time.Time // successful operations, successful PUTs
	var stale []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		key := []byte("avail")
		acked, maybe := "", map[string]bool{}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("v%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.Put(ctx, key, []byte(v))
			cancel()
			now := time.Now()
			if err == nil {
				acked = v
				mu.Lock()
				okAt, putAt = append(okAt, now), append(putAt, now)
				mu.Unlock()
			} else {
				maybe[v] = true
			}
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
			got, err := c.Get(ctx, key)
			cancel()
			now = time.Now()
			switch {
			case err != nil:
			case string(got) == acked || maybe[string(got)]:
				mu.Lock()
				okAt = append(okAt, now)
				mu.Unlock()
			default:
				mu.Lock()
				stale = append(stale, fmt.Sprintf("read %q after %q was acknowledged", got, acked))
				mu.Unlock()
			}
		}
	}()

	time.Sleep(2 * time.Second)
	l := leaderOf(t, pc, 15*time.Second)
	frozeAt := time.Now()
	if err := l.Freeze(freeze); err != nil {
		t.Fatal(err)
	}
	t.Logf("froze leader %d for %v", l.ID, freeze)
	time.Sleep(freeze + 3*time.Second)
	close(stop)
	<-done

	mu.Lock()
	defer mu.Unlock()
	for _, s := range stale {
		t.Errorf("stale read: %s", s)
	}
	gap, at := longestGap(okAt, frozeAt)
	putGap, _ := longestGap(putAt, frozeAt)
	t.Logf("leader frozen for %v: longest window without a successful operation %v (from %+.2fs after the freeze began); without a successful PUT %v; %d operations succeeded",
		freeze, gap.Round(time.Millisecond), at.Seconds(), putGap.Round(time.Millisecond), len(okAt))
	if gap >= bound {
		t.Errorf("the client went %v without a successful operation while the leader was frozen (bound %v)", gap.Round(time.Millisecond), bound)
	}
}

// longestGap is the longest time between consecutive times in ts (sorted),
// and when it began relative to ref.
func longestGap(ts []time.Time, ref time.Time) (time.Duration, time.Duration) {
	var gap, at time.Duration
	for i := 1; i < len(ts); i++ {
		if d := ts[i].Sub(ts[i-1]); d > gap {
			gap, at = d, ts[i-1].Sub(ref)
		}
	}
	return gap, at
}
