package server_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// watchWrite is one write the writer attempted: its key and value, and
// the version it got if it was acknowledged (0: failed, maybe applied).
type watchWrite struct {
	key, value string
	version    uint64
}

// watchHistory records the writer's writes.
type watchHistory struct {
	mu     sync.Mutex
	writes []watchWrite
	acked  int
	maxVer uint64
}

func (h *watchHistory) add(w watchWrite) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes = append(h.writes, w)
	if w.version != 0 {
		h.acked++
		h.maxVer = max(h.maxVer, w.version)
	}
}

func (h *watchHistory) ackedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acked
}

// writeLoop writes until stop: PUTs over 50 keys, and every tenth write a
// transaction of two PUTs (two events of one version).
func writeLoop(ctx context.Context, c *client.Client, h *watchHistory, stop *atomic.Bool) {
	for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
		v := strconv.Itoa(i)
		if i%10 == 9 {
			a, b := "k/t"+v+"a", "k/t"+v+"b"
			r, err := c.Txn(ctx, client.Txn{Then: []client.Op{client.OpPut([]byte(a), []byte(v)), client.OpPut([]byte(b), []byte(v))}})
			var ver uint64
			if err == nil {
				ver = r.Version
			}
			h.add(watchWrite{a, v, ver})
			h.add(watchWrite{b, v, ver})
			continue
		}
		key := "k/" + strconv.Itoa(i%50)
		ver, err := c.PutVersion(ctx, []byte(key), []byte(v))
		if err != nil {
			ver = 0
		}
		h.add(watchWrite{key, v, ver})
	}
}

// TestWatchResumesAcrossLeaderKill is issue 12's acceptance test for
// watches: a prefix watch streams from the leader while a writer writes
// continuously; the leader is killed mid-stream; the client resumes the
// watch on another node by itself. The events delivered must be every
// acknowledged write, once each, in commit order, with its value and
// version; a write whose outcome the writer does not know may appear
// (once) or not; nothing else may.
func TestWatchResumesAcrossLeaderKill(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	leader := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	eps := append([]string{leader.Addr}, kvdtest.Endpoints(othersThan(nodes, leader))...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wc := newClient(t, eps, client.Linearizable) // the watch's own client: its leader is the first endpoint
	c := newClient(t, eps, client.Linearizable)
	v0, err := c.PutVersion(ctx, []byte("k/start"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	ch := wc.Watch(ctx, []byte("k/"), client.WithPrefix(), client.WithFromVersion(v0+1))

	var mu sync.Mutex
	var events []client.Event
	var watchErr error
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for r := range ch {
			mu.Lock()
			events = append(events, r.Events...)
			if r.Err != nil {
				watchErr = r.Err
			}
			mu.Unlock()
		}
	}()
	seen := func() (int, uint64) {
		mu.Lock()
		defer mu.Unlock()
		if len(events) == 0 {
			return 0, 0
		}
		return len(events), events[len(events)-1].Version
	}

	h := &watchHistory{}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		writeLoop(ctx, c, h, &stop)
	}()
	waitFor(t, "the watch to deliver 200 events from the leader", func() bool { n, _ := seen(); return n >= 200 })
	n, last := seen()
	t.Logf("killing leader %d after %d events (version %d)", leader.ID, n, last)
	leader.Stop()
	before := h.ackedCount()
	waitFor(t, "200 writes acknowledged after the kill", func() bool { return h.ackedCount() >= before+200 })
	stop.Store(true)
	<-done
	waitFor(t, "the watch to deliver the last acknowledged write", func() bool {
		_, v := seen()
		h.mu.Lock()
		defer h.mu.Unlock()
		return v >= h.maxVer
	})
	cancel()
	<-collected
	if watchErr != nil {
		t.Fatalf("watch ended with %v", watchErr)
	}
	checkWatchHistory(t, events, h)
	t.Logf("%d events checked against %d writes (%d acknowledged)", len(events), len(h.writes), h.acked)
}

// checkWatchHistory: events are in commit order with no duplicate, every
// acknowledged write is among them with its version and value, and every
// event is a write that was attempted.
func checkWatchHistory(t *testing.T, events []client.Event, h *watchHistory) {
	t.Helper()
	type kv struct{ key, value string }
	attempted := map[kv]bool{}
	for _, w := range h.writes {
		attempted[kv{w.key, w.value}] = true
	}
	got := map[string]client.Event{} // by "version key"
	var prev uint64
	for i, e := range events {
		id := fmt.Sprintf("%d %s", e.Version, e.Key)
		switch {
		case e.Version < prev:
			t.Fatalf("event %d (%s) out of order: version %d after %d", i, e.Key, e.Version, prev)
		case got[id].Version != 0:
			t.Fatalf("event %d: %s delivered twice", i, id)
		case e.Type != client.EventPut || !attempted[kv{string(e.Key), string(e.Value)}]:
			t.Fatalf("event %d: %s %s=%s was never written", i, e.Type, e.Key, e.Value)
		}
		prev = e.Version
		got[id] = e
	}
	for _, w := range h.writes {
		if w.version == 0 {
			continue
		}
		e, ok := got[fmt.Sprintf("%d %s", w.version, w.key)]
		if !ok || string(e.Value) != w.value {
			t.Fatalf("acknowledged write %s=%s at version %d: delivered %v (%+v)", w.key, w.value, w.version, ok, e)
		}
	}
}

// TestWatchLeavesIsolatedNode: the node a watch streams from (the leader)
// is cut off from the others. It applies nothing more, so it must end the
// watch once it knows it has no leader, and the client must resume on the
// new majority and deliver the write made there.
func TestWatchLeavesIsolatedNode(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	old := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	rest := othersThan(nodes, old)
	eps := append([]string{old.Addr}, kvdtest.Endpoints(rest)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newClient(t, eps, client.Linearizable)
	v0, err := c.PutVersion(ctx, []byte("iso"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	ch := newClient(t, eps, client.Linearizable).Watch(ctx, []byte("iso"), client.WithFromVersion(v0))
	if got := collect(t, ch, 1, 10*time.Second); got[0] != fmt.Sprintf("%d PUT iso=0", v0) {
		t.Fatalf("first event %q", got)
	}
	old.Isolate(rest...)
	t.Cleanup(func() { old.Rejoin(rest...) })
	leader := kvdtest.WaitLeader(t, rest, 20*time.Second)
	v1, err := newClient(t, []string{leader.Addr}, client.Linearizable).PutVersion(ctx, []byte("iso"), []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, ch, 1, 30*time.Second); got[0] != fmt.Sprintf("%d PUT iso=1", v1) {
		t.Fatalf("event after the isolation: %q", got)
	}
}
