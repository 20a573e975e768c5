package chaos

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestWatchAcrossLeaderKills: a prefix watch on a 3-process cluster while
// a writer writes; the leader is SIGKILLed mid-stream and restarted (its
// watch history starts over), then the new leader is SIGKILLed too. The
// watch, resumed by the client each time, must hold every acknowledged
// write once, in commit order, and nothing that was not written.
func TestWatchAcrossLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	pc := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newClient(t, pc.Endpoints(), client.Linearizable)
	v0, err := c.PutRevision(ctx, []byte("w/start"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	wc := newClient(t, pc.Endpoints(), client.Linearizable)
	col := kvdtest.CollectWatch(wc.Watch(ctx, []byte("w/"), client.WithPrefix(), client.WithFromRevision(v0+1)))
	h := &kvdtest.WatchHistory{}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		kvdtest.WatchWriter(ctx, c, "w/", h, &stop)
	}()
	// Generous: the writes follow a SIGKILL and a restart.
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		wait.Within(t, 60*time.Second, what, cond)
	}
	ackedMore := func(n int) func() bool {
		before, _ := h.Acked()
		return func() bool { a, _ := h.Acked(); return a >= before+n }
	}
	waitUntil("150 events", func() bool { n, _ := col.Seen(); return n >= 150 })
	for round := range 2 {
		l := leaderOf(t, pc, 20*time.Second)
		n, last := col.Seen()
		t.Logf("round %d: SIGKILL leader %s after %d events (version %d)", round, l.Addr, n, last)
		l.Kill()
		waitUntil("150 writes acknowledged after the kill", ackedMore(150))
		if err := l.Start(); err != nil {
			t.Fatal(err)
		}
		waitUntil("150 more writes acknowledged after the restart", ackedMore(150))
	}
	stop.Store(true)
	<-done
	kvdtest.FinishWatch(t, col, h, cancel, 60*time.Second)
}
