package kvdtest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// WatchWrite is one write a watch test's writer attempted: its key and
// value, and the version it got if acknowledged (0: failed, maybe applied).
type WatchWrite struct {
	Key, Value string
	Version    uint64
}

// WatchHistory records a watch test's writes.
type WatchHistory struct {
	mu     sync.Mutex
	writes []WatchWrite
	acked  int
	maxVer uint64
}

func (h *WatchHistory) add(w WatchWrite) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes = append(h.writes, w)
	if w.Version != 0 {
		h.acked++
		h.maxVer = max(h.maxVer, w.Version)
	}
}

// Acked is how many writes were acknowledged, and the highest version.
func (h *WatchHistory) Acked() (n int, maxVersion uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acked, h.maxVer
}

// Writes is how many writes were attempted.
func (h *WatchHistory) Writes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.writes)
}

// WatchWriter writes under prefix until stop or ctx ends: PUTs over 50
// keys, and every tenth write a transaction of two PUTs (two events of one
// version), recording each in h.
func WatchWriter(ctx context.Context, c *client.Client, prefix string, h *WatchHistory, stop *atomic.Bool) {
	for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
		v := strconv.Itoa(i)
		if i%10 == 9 {
			a, b := prefix+"t"+v+"a", prefix+"t"+v+"b"
			r, err := c.Txn(ctx, client.Txn{Then: []client.Op{client.OpPut([]byte(a), []byte(v)), client.OpPut([]byte(b), []byte(v))}})
			var ver uint64
			if err == nil {
				ver = r.Revision
			}
			h.add(WatchWrite{a, v, ver})
			h.add(WatchWrite{b, v, ver})
			continue
		}
		key := prefix + strconv.Itoa(i%50)
		ver, err := c.PutRevision(ctx, []byte(key), []byte(v))
		if err != nil {
			ver = 0
		}
		h.add(WatchWrite{key, v, ver})
	}
}

// CheckWatchEvents reports the first way events break the watch contract
// against h: out of commit order, delivered twice, never written, or an
// acknowledged write missing (or with another value). A write whose
// outcome is unknown may be there once or not at all.
func CheckWatchEvents(events []client.Event, h *WatchHistory) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	type kv struct{ key, value string }
	attempted := map[kv]bool{}
	for _, w := range h.writes {
		attempted[kv{w.Key, w.Value}] = true
	}
	got := map[string]client.Event{} // by "version key"
	var prev uint64
	for i, e := range events {
		id := fmt.Sprintf("%d %s", e.ModRevision, e.Key)
		switch {
		case e.ModRevision < prev:
			return fmt.Errorf("event %d (%s) out of order: version %d after %d", i, e.Key, e.ModRevision, prev)
		case got[id].ModRevision != 0:
			return fmt.Errorf("event %d: %s delivered twice", i, id)
		case e.Type != client.EventPut || !attempted[kv{string(e.Key), string(e.Value)}]:
			return fmt.Errorf("event %d: %s %s=%s was never written", i, e.Type, e.Key, e.Value)
		}
		prev = e.ModRevision
		got[id] = e
	}
	for _, w := range h.writes {
		if w.Version == 0 {
			continue
		}
		if e, ok := got[fmt.Sprintf("%d %s", w.Version, w.Key)]; !ok || string(e.Value) != w.Value {
			return fmt.Errorf("acknowledged write %s=%s at version %d: delivered %v (%+v)", w.Key, w.Value, w.Version, ok, e)
		}
	}
	return nil
}

// WatchCollector gathers a watch's events on a goroutine of its own.
type WatchCollector struct {
	mu     sync.Mutex
	events []client.Event
	err    error
	done   chan struct{}
}

// CollectWatch reads ch until it closes.
func CollectWatch(ch <-chan client.WatchResponse) *WatchCollector {
	wc := &WatchCollector{done: make(chan struct{})}
	go func() {
		defer close(wc.done)
		for r := range ch {
			wc.mu.Lock()
			wc.events = append(wc.events, r.Events...)
			if r.Err != nil {
				wc.err = r.Err
			}
			wc.mu.Unlock()
		}
	}()
	return wc
}

// Seen is how many events arrived and the last one's version.
func (wc *WatchCollector) Seen() (int, uint64) {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if len(wc.events) == 0 {
		return 0, 0
	}
	return len(wc.events), wc.events[len(wc.events)-1].ModRevision
}

// Wait waits for the watch's channel to close (cancel its context first)
// and returns its events and the error that ended it, if any.
func (wc *WatchCollector) Wait() ([]client.Event, error) {
	<-wc.done
	return wc.events, wc.err
}

// FinishWatch ends a watch test: it waits (up to timeout) until col has
// seen the last write h acknowledged, cancels the watch, and checks every
// event against h (CheckWatchEvents), failing t otherwise.
func FinishWatch(t testing.TB, col *WatchCollector, h *WatchHistory, cancel func(), timeout time.Duration) {
	t.Helper()
	wait.Within(t, timeout, "the watch to deliver the last acknowledged write", func() bool {
		_, v := col.Seen()
		_, maxVer := h.Acked()
		return v >= maxVer
	})
	cancel()
	events, err := col.Wait()
	if err != nil {
		t.Fatalf("watch ended with %v", err)
	}
	if err := CheckWatchEvents(events, h); err != nil {
		t.Fatal(err)
	}
	acked, _ := h.Acked()
	t.Logf("%d events checked against %d writes (%d acknowledged)", len(events), h.Writes(), acked)
}
