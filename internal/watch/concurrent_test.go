package watch

import (
	"fmt"
	"sync"
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
)

// TestConcurrentPublishAndWatchers: watchers reading while batches are
// published each see every matching event once, in order (run with
// -race).
func TestConcurrentPublishAndWatchers(t *testing.T) {
	t.Parallel()
	const batches, perBatch = 300, 7
	h := newHub(t, Config{HistoryEvents: batches * perBatch})
	var wg sync.WaitGroup
	results := make([][]uint64, 4)
	for i := range results {
		w, err := h.Watch([]byte(fmt.Sprint(i%2)), true, 1)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Close()
			var evs []wire.WatchEvent
			for w.Progress() < batches {
				changed := h.Changed()
				var err error
				evs, _, err = w.Next(evs[:0], 5, 1<<20)
				if err != nil {
					t.Error(err)
					return
				}
				for _, e := range evs {
					results[i] = append(results[i], e.Version*100+uint64(e.Key[1]-'a'))
				}
				if len(evs) == 0 && w.Progress() < batches {
					<-changed
				}
			}
		}()
	}
	for v := uint64(1); v <= batches; v++ {
		var evs []wire.WatchEvent
		for j := range perBatch {
			evs = append(evs, put(v, fmt.Sprintf("%d%c", j%2, 'a'+j), "x"))
		}
		h.Publish(evs, v)
	}
	wg.Wait()
	for i, got := range results {
		var want []uint64
		for v := uint64(1); v <= batches; v++ {
			for j := range perBatch {
				if j%2 == i%2 {
					want = append(want, v*100+uint64(j))
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("watcher %d: %d events, want %d", i, len(got), len(want))
		}
	}
}
