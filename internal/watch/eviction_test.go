package watch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
)

// TestEvictionDropsOnlyWatchersItRobs: a burst of writes larger than the
// history evicts events past caught-up watchers' cursors. A watcher none
// of those events was for lost nothing and goes on, complete through the
// burst; one that had an event among them is dropped as slow. Dropping
// every watcher would make its client's resume from the version it was at,
// evicted on every node alike, fail as compacted.
func TestEvictionDropsOnlyWatchersItRobs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		key      string
		prefix   bool
		wantSlow bool
	}{
		{"a quiet key", "quiet", false, false},
		{"a quiet prefix", "q/", true, false},
		{"a key written early in the burst", "busy7", false, true},
		{"a prefix written early in the burst", "busy", true, true},
		{"a key written last", "busy19", false, false}, // the newest version is never evicted
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t, Config{HistoryEvents: 10})
			h.Publish(nil, 100)
			w, err := h.Watch([]byte(tc.key), tc.prefix, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if _, p := next(t, w, 1000, 1<<20); p != 100 {
				t.Fatalf("progress %d, want 100 (caught up)", p)
			}
			var evs []wire.WatchEvent
			for i := range 20 {
				evs = append(evs, put(101+uint64(i), fmt.Sprintf("busy%d", i), "x"))
			}
			h.Publish(evs, 120) // one applied batch, twice the history
			got, p, err := w.Next(nil, 1000, 1<<20)
			var ce *CompactedError
			if tc.wantSlow {
				if !errors.As(err, &ce) || !ce.Slow {
					t.Fatalf("Next: %v, want a slow watcher dropped", err)
				}
				return
			}
			if err != nil || p != 120 {
				t.Fatalf("Next: %s, progress %d, %v; want progress 120", show(got), p, err)
			}
			if tc.key == "busy19" && (len(got) != 1 || got[0].Version != 120) {
				t.Fatalf("got %s, want the write at 120", show(got))
			}
		})
	}
}

// TestClosedWatchersLeaveTheIndex: the hub forgets closed watchers, so
// eviction neither keeps them alive nor scans them.
func TestClosedWatchersLeaveTheIndex(t *testing.T) {
	t.Parallel()
	h := newHub(t, Config{})
	var ws []*Watcher
	for _, k := range []string{"a", "a", "b"} {
		for _, prefix := range []bool{false, true} {
			w, err := h.Watch([]byte(k), prefix, 0)
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
	}
	if len(h.byKey) != 2 || len(h.byKey["a"]) != 2 || len(h.prefixed) != 3 {
		t.Fatalf("index: %d keys (a: %d), %d prefixes; want 2 (a: 2), 3", len(h.byKey), len(h.byKey["a"]), len(h.prefixed))
	}
	for _, w := range ws {
		w.Close()
		w.Close() // idempotent
	}
	if len(h.byKey) != 0 || len(h.prefixed) != 0 || h.Watchers() != 0 {
		t.Fatalf("after Close: %d keys, %d prefixes, %d watchers", len(h.byKey), len(h.prefixed), h.Watchers())
	}
}
