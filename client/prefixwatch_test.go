package client_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestPrefixThenWatchHasNoGap: the documented recipe, read a prefix and
// watch from the response's Index+1, sees every write after the read,
// also for a prefix of several pages read while a key of its first page
// is written. Index was the last page's: a write made while a later page
// was read had a version at most Index, was in neither the read nor the
// watch, and the key stayed stale for whoever followed the recipe.
func TestPrefixThenWatchHasNoGap(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	const n = 3500 // 4 pages of at most 1000 keys
	val := make([]byte, 200)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := c.Put(ctx, []byte(fmt.Sprintf("p/%05d", i)), val); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for attempt := range 20 {
		var stop atomic.Bool
		var mu sync.Mutex
		var acked []uint64 // versions of acknowledged writes of p/00000
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; !stop.Load(); i++ {
				v, err := c.PutRevision(ctx, []byte("p/00000"), []byte(fmt.Sprint(i)))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, v)
				mu.Unlock()
			}
		}()
		// Read while the writer writes, once it has a write acknowledged.
		wait.For(t, "the writer's first acknowledged write", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) > 0
		})
		r, err := c.Prefix(ctx, []byte("p/"))
		stop.Store(true)
		<-done
		if err != nil {
			t.Fatal(err)
		}
		if len(r.KVs) != n {
			t.Fatalf("prefix: %d keys, want %d", len(r.KVs), n)
		}
		seen := r.KVs[0].ModRevision
		got := watchUntil(t, c, "p/00000", r.Revision+1, acked[len(acked)-1])
		for _, v := range acked {
			if v > seen && !got[v] {
				t.Fatalf("attempt %d: the write of p/00000 at version %d is in neither the read (version %d of the key, "+
					"Index %d) nor the watch from Index+1", attempt, v, seen, r.Revision)
			}
		}
	}
}

// watchUntil watches key from version from until an event at version last
// or later, and returns the versions of the events delivered.
func watchUntil(t *testing.T, c *client.Client, key string, from, last uint64) map[uint64]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := map[uint64]bool{}
	for resp := range c.Watch(ctx, []byte(key), client.WithFromRevision(from)) {
		if resp.Err != nil {
			t.Fatal(resp.Err)
		}
		for _, e := range resp.Events {
			if got[e.ModRevision] = true; e.ModRevision >= last {
				return got
			}
		}
	}
	t.Fatalf("the watch of %s from %d ended before version %d", key, from, last)
	return nil
}
