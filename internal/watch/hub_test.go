package watch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
)

func put(v uint64, k, val string) wire.WatchEvent {
	return wire.WatchEvent{Type: wire.EventPut, Key: []byte(k), Value: []byte(val), Version: v}
}

func del(v uint64, k string) wire.WatchEvent {
	return wire.WatchEvent{Type: wire.EventDelete, Key: []byte(k), Version: v}
}

func newHub(t *testing.T, cfg Config) *Hub {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func show(evs []wire.WatchEvent) string {
	s := ""
	for _, e := range evs {
		s += fmt.Sprintf("%d:%s:%s=%s ", e.Version, e.Type, e.Key, e.Value)
	}
	return s
}

func next(t *testing.T, w *Watcher, maxEvents, maxBytes int) ([]wire.WatchEvent, uint64) {
	t.Helper()
	evs, p, err := w.Next(nil, maxEvents, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	return evs, p
}

func TestMatchOrderAndFrom(t *testing.T) {
	t.Parallel()
	h := newHub(t, Config{})
	h.Publish([]wire.WatchEvent{put(2, "a/1", "x"), put(3, "b", "y"), put(4, "a/2", "z"), del(4, "a/1")}, 5)
	pw, err := h.Watch([]byte("a/"), true, 3)
	if err != nil {
		t.Fatal(err)
	}
	kw, _ := h.Watch([]byte("b"), false, 1)
	evs, p := next(t, pw, 100, 1<<20)
	if got, want := show(evs), "4:PUT:a/2=z 4:DELETE:a/1= "; got != want || p != 5 {
		t.Fatalf("prefix watch: %q progress %d, want %q 5", got, p, want)
	}
	evs, _ = next(t, kw, 100, 1<<20)
	if got := show(evs); got != "3:PUT:b=y " {
		t.Fatalf("key watch: %q", got)
	}
	// From now: nothing before, everything after.
	now, _ := h.Watch([]byte("a/"), true, 0)
	if evs, p := next(t, now, 100, 1<<20); len(evs) != 0 || p != 5 {
		t.Fatalf("from now: %q progress %d", show(evs), p)
	}
	h.Publish([]wire.WatchEvent{put(6, "a/3", "w"), put(6, "c", "v")}, 7)
	if evs, p := next(t, now, 100, 1<<20); show(evs) != "6:PUT:a/3=w " || p != 7 {
		t.Fatalf("from now, after a publish: %q progress %d", show(evs), p)
	}
}

// TestNextKeepsRevisionsWhole: a message ends at a revision's end; only a
// revision alone past the bounds is cut (a fragment), and the progress
// then stays below it.
func TestNextKeepsRevisionsWhole(t *testing.T) {
	t.Parallel()
	h := newHub(t, Config{})
	h.Publish([]wire.WatchEvent{put(2, "k", "1"), put(3, "k", "2"), put(3, "k", "3"), put(4, "k", "4")}, 4)
	w, _ := h.Watch([]byte("k"), false, 1)
	steps := []struct {
		maxEvents, maxBytes int
		want                string
		progress            uint64
	}{
		{2, 1 << 20, "2:PUT:k=1 ", 2}, // revision 3 does not fit whole after 2: not begun
		{100, 3, "3:PUT:k=2 ", 2},     // 2 bytes per event: revision 3 alone is past 3 bytes
		{100, 3, "3:PUT:k=3 ", 3},     // its rest
		{100, 1, "4:PUT:k=4 ", 4},     // at least one event even over the bound
	}
	for i, s := range steps {
		evs, p := next(t, w, s.maxEvents, s.maxBytes)
		if show(evs) != s.want || p != s.progress {
			t.Fatalf("step %d: %q progress %d, want %q progress %d", i, show(evs), p, s.want, s.progress)
		}
	}
}

func TestCompacted(t *testing.T) {
	t.Parallel()
	h := newHub(t, Config{HistoryEvents: 2})
	h.Publish([]wire.WatchEvent{put(2, "k", "1"), put(3, "k", "2"), put(3, "j", "2"), put(4, "k", "3")}, 4)
	// Version 2 and one event of version 3 were evicted: 4 is the oldest whole version.
	var ce *CompactedError
	if _, err := h.Watch([]byte("k"), false, 3); !errors.As(err, &ce) || ce.Oldest != 4 || ce.Slow {
		t.Fatalf("watch from 3: %v", err)
	}
	w, err := h.Watch([]byte("k"), false, 4)
	if err != nil {
		t.Fatal(err)
	}
	if evs, _ := next(t, w, 10, 100); show(evs) != "4:PUT:k=3 " {
		t.Fatalf("from 4: %q", show(evs))
	}
	// A restart or snapshot: nothing up to the index is known.
	h.Reset(10)
	if _, err := h.Watch(nil, true, 10); !errors.As(err, &ce) || ce.Oldest != 11 {
		t.Fatalf("watch from 10 after reset: %v", err)
	}
	if _, _, err := w.Next(nil, 10, 100); !errors.As(err, &ce) {
		t.Fatalf("open watcher across a reset: %v", err)
	}
	future, _ := h.Watch([]byte("k"), false, 12)
	h.Publish([]wire.WatchEvent{put(11, "k", "a"), put(12, "k", "b")}, 12)
	if evs, p := next(t, future, 10, 100); show(evs) != "12:PUT:k=b " || p != 12 {
		t.Fatalf("future watcher: %q %d", show(evs), p)
	}
}

func TestSlowWatcherDropped(t *testing.T) {
	t.Parallel()
	h := newHub(t, Config{HistoryEvents: 2})
	w, _ := h.Watch([]byte("k"), false, 0)
	h.Publish([]wire.WatchEvent{put(1, "k", "1"), put(2, "k", "2")}, 2)
	if evs, _ := next(t, w, 1, 100); len(evs) != 1 {
		t.Fatalf("%q", show(evs))
	}
	// Three more events evict versions 1 to 3 before the watcher took 2.
	h.Publish([]wire.WatchEvent{put(3, "x", "3"), put(4, "x", "4"), put(5, "x", "5")}, 5)
	var ce *CompactedError
	if _, _, err := w.Next(nil, 10, 100); !errors.As(err, &ce) || !ce.Slow || ce.Requested != 2 {
		t.Fatalf("slow watcher: %v", err)
	}
}

func TestMaxWatchers(t *testing.T) {
	t.Parallel()
	h := newHub(t, Config{MaxWatchers: 1})
	w, err := h.Watch([]byte("k"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Watch([]byte("k"), false, 0); !errors.Is(err, ErrTooManyWatchers) {
		t.Fatalf("second watcher: %v", err)
	}
	w.Close()
	w.Close()
	if _, err := h.Watch([]byte("k"), false, 0); err != nil {
		t.Fatalf("after close: %v", err)
	}
}

func TestHistoryBytesBound(t *testing.T) {
	t.Parallel()
	h := newHub(t, Config{HistoryBytes: wire.MaxWatchBytes})
	big := string(make([]byte, wire.MaxWatchBytes/2))
	for v := uint64(1); v <= 5; v++ {
		h.Publish([]wire.WatchEvent{put(v, "k", big)}, v)
	}
	if n, b := h.Len(); n != 1 || b > wire.MaxWatchBytes {
		t.Fatalf("held %d events of %d bytes", n, b)
	}
	if h.Oldest() != 5 {
		t.Fatalf("oldest %d", h.Oldest())
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	var zero Config
	if err := zero.Validate(); err != nil || zero != (Config{}) {
		t.Fatalf("Validate of the zero Config: %v, changed it to %+v", err, zero)
	}
	c := zero.WithDefaults()
	if c.HistoryEvents != DefaultHistoryEvents || c.HistoryBytes != DefaultHistoryBytes ||
		c.MaxWatchers != DefaultMaxWatchers {
		t.Fatalf("defaults: %+v", c)
	}
	for _, bad := range []Config{{HistoryEvents: -1}, {MaxWatchers: -1}, {HistoryBytes: wire.MaxWatchBytes - 1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestHistoryKeepsTheNewestEvent: the smallest history Validate accepts
// (1 MiB) is less than one write of the largest value under a long key;
// such an event must not be evicted as it is published, which would drop
// every caught-up watcher of it as slow.
func TestHistoryKeepsTheNewestEvent(t *testing.T) {
	t.Parallel()
	h := newHub(t, Config{HistoryBytes: wire.MaxWatchBytes})
	w, err := h.Watch(nil, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("k", 1024)
	for v := uint64(1); v <= 3; v++ {
		h.Publish([]wire.WatchEvent{put(v, key, strings.Repeat("v", 1<<20))}, v)
		evs, progress, err := w.Next(nil, wire.MaxWatchEvents, wire.MaxWatchBytes)
		if err != nil || len(evs) != 1 || evs[0].Version != v || progress != v {
			t.Fatalf("version %d: a caught-up watcher got %d events (progress %d, err %v)", v, len(evs), progress, err)
		}
	}
	// The bound still holds for the rest: only the newest is kept.
	if _, err := h.Watch(nil, true, 2); err == nil {
		t.Fatalf("a watch from version 2 was accepted: the history holds more than the newest event")
	}
}

// TestHistoryKeepsTheNewestVersionWhole: a caught-up watcher must get
// every write of a transaction whose events together exceed the byte
// bound (two PUTs of ~0.5 MiB, a valid transaction), as it gets one
// oversized event (TestHistoryKeepsTheNewestEvent). Evicting part of the
// newest version drops every caught-up watcher as "slow", and no node can
// serve that version again.
func TestHistoryKeepsTheNewestVersionWhole(t *testing.T) {
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
