package watch

import (
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
)

// TestHistoryKeepsTheNewestVersionWhole: a caught-up watcher must get
// every write of a transaction whose events together exceed the byte
// bound (two PUTs of ~0.5 MiB, a valid transaction), as it gets one
// oversized event (TestHistoryKeepsTheNewestEvent). Evicting part of the
// newest version drops every caught-up watcher as "slow", and no node can
// serve that version again.
func TestHistoryKeepsTheNewestVersionWhole(t *testing.T) {
	t.Parallel()
	h := newHub(t, Config{HistoryBytes: wire.MaxWatchBytes})
	w, err := h.Watch(nil, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	txn := []wire.WatchEvent{
		put(1, "a", strings.Repeat("x", 600000)),
		put(1, "b", strings.Repeat("y", 449576)),
	}
	h.Publish(txn, 1)
	var got []wire.WatchEvent
	for len(got) < 2 {
		evs, _, err := w.Next(nil, wire.MaxWatchEvents, wire.MaxWatchBytes)
		if err != nil {
			t.Fatalf("caught-up watcher after %d of the transaction's 2 events: %v", len(got), err)
		}
		if len(evs) == 0 {
			t.Fatalf("caught-up watcher got %d of the transaction's 2 events", len(got))
		}
		got = append(got, evs...)
	}
}

// TestHistoryEventsKeepsTheNewestVersionWhole: the same with the event
// bound: a lease revoke (up to 1000 deletes) or a transaction (up to 64
// writes) is one version; a history of fewer events must not drop a
// caught-up watcher in its middle.
func TestHistoryEventsKeepsTheNewestVersionWhole(t *testing.T) {
	t.Parallel()
	h := newHub(t, Config{HistoryEvents: 2})
	w, err := h.Watch(nil, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.Publish([]wire.WatchEvent{del(5, "a"), del(5, "b"), del(5, "c")}, 5)
	evs, _, err := w.Next(nil, wire.MaxWatchEvents, wire.MaxWatchBytes)
	if err != nil || len(evs) != 3 {
		t.Fatalf("caught-up watcher of a 3-key revoke with a 2-event history: %d events, %v", len(evs), err)
	}
}
