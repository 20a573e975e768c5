package watch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/wire"
)

// fakeStore is a stored history: every event ever published, and a
// compaction revision.
type fakeStore struct {
	evs     []wire.WatchEvent
	compact uint64
}

func (s *fakeStore) Changes(from uint64, fn func(wire.WatchEvent) bool) error {
	if from <= s.compact {
		return fmt.Errorf("%w: %d", errs.ErrCompacted, from)
	}
	for _, e := range s.evs {
		if e.Version >= from && !fn(e) {
			return nil
		}
	}
	return nil
}

func (s *fakeStore) CompactRevision() uint64 { return s.compact }

// publish is what the node does: the events go to disk and to the hub.
func (s *fakeStore) publish(h *Hub, evs ...wire.WatchEvent) {
	s.evs = append(s.evs, evs...)
	h.Publish(evs, evs[len(evs)-1].Version)
}

// drain reads w until it has nothing more, maxEvents at a time.
func drain(t *testing.T, w *Watcher, maxEvents int) (string, uint64) {
	t.Helper()
	all, progress := "", uint64(0)
	for range 100 {
		evs, p, err := w.Next(nil, maxEvents, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		all, progress = all+show(evs), p
		if len(evs) == 0 {
			return all, progress
		}
	}
	t.Fatal("watcher never drained")
	return "", 0
}

// TestWatchFromStoredHistory: a watch from a revision the hub's memory
// lacks (the node restarted after it) is served from the stored history,
// then from memory, in order, with nothing lost or repeated, however the
// limits cut it, a revision of many events included.
func TestWatchFromStoredHistory(t *testing.T) {
	for _, maxEvents := range []int{1, 2, 3, 100} {
		st := &fakeStore{}
		h := newHub(t, Config{Store: st})
		st.evs = []wire.WatchEvent{put(1, "a", "1"), put(2, "b", "x"), put(3, "a", "2"), put(3, "a2", "t"), put(3, "a3", "t"), del(4, "a")}
		h.Reset(4) // the process starts: its memory holds nothing before 5
		st.publish(h, put(5, "a", "3"))
		st.publish(h, put(6, "b", "y"), put(6, "a", "4"))
		w, err := h.Watch([]byte("a"), true, 2)
		if err != nil {
			t.Fatal(err)
		}
		got, progress := drain(t, w, maxEvents)
		want := "3:PUT:a=2 3:PUT:a2=t 3:PUT:a3=t 4:DELETE:a= 5:PUT:a=3 6:PUT:a=4 "
		if got != want || progress != 6 {
			t.Errorf("maxEvents %d: got %s at %d\nwant %s at 6", maxEvents, got, progress, want)
		}
		st.publish(h, put(7, "a", "5"))
		if got, _ := drain(t, w, maxEvents); got != "7:PUT:a=5 " {
			t.Errorf("maxEvents %d: after catching up: %s", maxEvents, got)
		}
	}
}

// TestWatchBelowStoredCompaction: a watch from a compacted revision fails
// naming the history's compaction revision, not this node's memory.
func TestWatchBelowStoredCompaction(t *testing.T) {
	st := &fakeStore{compact: 3}
	h := newHub(t, Config{Store: st})
	h.Reset(10)
	_, err := h.Watch([]byte("a"), false, 3)
	var ce *CompactedError
	if !errors.As(err, &ce) || ce.Oldest != 4 || ce.Requested != 3 {
		t.Fatalf("watch from 3 with history compacted at 3: %v, want compacted, oldest 4", err)
	}
	if _, err := h.Watch([]byte("a"), false, 4); err != nil {
		t.Fatalf("watch from 4: %v", err)
	}
}

// TestSlowWatcherReadsStoredHistory: with a stored history, a watcher the
// memory evicted events from is not dropped: it reads them from disk.
func TestSlowWatcherReadsStoredHistory(t *testing.T) {
	st := &fakeStore{}
	h := newHub(t, Config{Store: st, HistoryEvents: 2})
	st.publish(h, put(1, "k", "0"))
	w, err := h.Watch([]byte("k"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(2); v <= 6; v++ {
		st.publish(h, put(v, "k", fmt.Sprint(v)))
	}
	got, progress := drain(t, w, 2)
	if want := "2:PUT:k=2 3:PUT:k=3 4:PUT:k=4 5:PUT:k=5 6:PUT:k=6 "; got != want || progress != 6 {
		t.Fatalf("got %s at %d, want %s at 6", got, progress, want)
	}
}

// TestWatchBelowCompactionRefusedFromMemory: the cluster's compaction
// decides, even while this node's memory still holds the events: a watch
// from a compacted revision fails on every member alike.
func TestWatchBelowCompactionRefusedFromMemory(t *testing.T) {
	st := &fakeStore{}
	h := newHub(t, Config{Store: st})
	for v := uint64(1); v <= 5; v++ {
		st.publish(h, put(v, "k", fmt.Sprint(v)))
	}
	st.compact = 3
	_, err := h.Watch([]byte("k"), false, 2)
	var ce *CompactedError
	if !errors.As(err, &ce) || ce.Oldest != 4 {
		t.Fatalf("watch from 2, compacted at 3, memory from 1: %v; want compacted, oldest 4", err)
	}
	w, err := h.Watch([]byte("k"), false, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := drain(t, w, 10); got != "4:PUT:k=4 5:PUT:k=5 " {
		t.Fatalf("watch from 4: %s", got)
	}
}
