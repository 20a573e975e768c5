package watch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// fakeStore is a stored history: every event ever published, and a
// compaction revision.
type fakeStore struct {
	evs     []wire.WatchEvent
	compact uint64
	prevs   int // calls of Prev
}

func (s *fakeStore) Changes(from uint64, prev bool, fn func(wire.WatchEvent) bool) error {
	if from <= s.compact {
		return fmt.Errorf("%w: %d", errs.ErrCompacted, from)
	}
	for _, e := range s.evs {
		if e.Version < from {
			continue
		}
		if prev {
			v, m, ok, _ := s.prevAt(e.Key, e.Version-1)
			e.PrevValue, e.PrevMeta, e.HasPrev = append([]byte{}, v...), m, ok
		}
		if !fn(e) {
			return nil
		}
	}
	return nil
}

// Prev is key's last event at or before rev; its Meta holds only Mod.
func (s *fakeStore) Prev(key []byte, rev uint64) ([]byte, revision.Meta, bool, error) {
	s.prevs++
	return s.prevAt(key, rev)
}

func (s *fakeStore) prevAt(key []byte, rev uint64) ([]byte, revision.Meta, bool, error) {
	if rev < s.compact {
		return nil, revision.Meta{}, false, fmt.Errorf("%w: %d", errs.ErrCompacted, rev)
	}
	var last *wire.WatchEvent
	for i, e := range s.evs {
		if e.Version <= rev && string(e.Key) == string(key) {
			last = &s.evs[i]
		}
	}
	if last == nil || last.Type == wire.EventDelete {
		return nil, revision.Meta{}, false, nil
	}
	return last.Value, revision.Meta{Mod: last.Version}, true, nil
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

// showPrev is show with each event's previous value (- for none).
func showPrev(evs []wire.WatchEvent) string {
	s := ""
	for _, e := range evs {
		prev := "-"
		if e.HasPrev {
			prev = fmt.Sprintf("%s@%d", e.PrevValue, e.PrevMeta.Mod)
		}
		s += fmt.Sprintf("%d:%s:%s=%s<%s ", e.Version, e.Type, e.Key, e.Value, prev)
	}
	return s
}

// TestPrevKVFromStoreAndMemory: a PrevKV watcher's events carry the key as
// it was just before, those read from the stored history (after a restart)
// and those from memory alike; a key that did not exist has none, and a
// watcher that did not ask gets none.
func TestPrevKVFromStoreAndMemory(t *testing.T) {
	st := &fakeStore{}
	h := newHub(t, Config{Store: st})
	st.evs = []wire.WatchEvent{put(1, "a", "1"), put(2, "a", "2"), del(3, "a")}
	h.Reset(3) // restarted: 1..3 only on disk
	st.publish(h, put(4, "a", "4"))
	st.publish(h, put(5, "a", "5"))
	w, err := h.Watch([]byte("a"), false, 1, PrevKV())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := h.Watch([]byte("a"), false, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got, gotPlain string
	for range 10 {
		evs, _, err := w.Next(nil, 1, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		pevs, _, err := plain.Next(nil, 1, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got, gotPlain = got+showPrev(evs), gotPlain+showPrev(pevs)
	}
	if want := "1:PUT:a=1<- 2:PUT:a=2<1@1 3:DELETE:a=<2@2 4:PUT:a=4<- 5:PUT:a=5<4@4 "; got != want {
		t.Errorf("prev_kv:\ngot  %s\nwant %s", got, want)
	}
	if want := "1:PUT:a=1<- 2:PUT:a=2<- 3:DELETE:a=<- 4:PUT:a=4<- 5:PUT:a=5<- "; gotPlain != want {
		t.Errorf("without prev_kv:\ngot  %s\nwant %s", gotPlain, want)
	}
}

// TestStoredReadKeepsRevisionsWhole: reading the stored history, a message
// ends at a revision's end too, and resumes at the revision it left out.
func TestStoredReadKeepsRevisionsWhole(t *testing.T) {
	st := &fakeStore{}
	h := newHub(t, Config{Store: st})
	st.evs = []wire.WatchEvent{put(1, "a", "1"), put(2, "a1", "x"), put(2, "a2", "y"), put(2, "a3", "z"), put(3, "a", "3")}
	h.Reset(3)
	w, err := h.Watch([]byte("a"), true, 1)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		maxEvents int
		want      string
		progress  uint64
	}{
		{2, "1:PUT:a=1 ", 1},             // revision 2 does not fit after 1
		{2, "2:PUT:a1=x 2:PUT:a2=y ", 1}, // alone past the bound: a fragment
		{2, "2:PUT:a3=z 3:PUT:a=3 ", 3},  // its rest, and 3
	}
	for i, s := range steps {
		evs, p, err := w.Next(nil, s.maxEvents, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if show(evs) != s.want || p != s.progress {
			t.Fatalf("step %d: %q progress %d, want %q progress %d", i, show(evs), p, s.want, s.progress)
		}
	}
}

// TestPrevKVOfADenseRevisionInOnePass: the previous values of a revision of
// many events from memory (a range delete's) come from one pass over the
// stored changes, not a read each, and are the same.
func TestPrevKVOfADenseRevisionInOnePass(t *testing.T) {
	st := &fakeStore{}
	h := newHub(t, Config{Store: st})
	var puts, dels []wire.WatchEvent
	for i := range 20 {
		k := fmt.Sprintf("d/%02d", i)
		puts = append(puts, put(uint64(i+1), k, fmt.Sprint(i)))
		dels = append(dels, del(21, k))
	}
	for _, e := range puts {
		st.publish(h, e)
	}
	w, err := h.Watch([]byte("d/"), true, 0, PrevKV())
	if err != nil {
		t.Fatal(err)
	}
	st.publish(h, dels...)
	evs, _, err := w.Next(nil, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 20 || st.prevs != 0 {
		t.Fatalf("%d events, %d reads of a previous value; want 20 and none", len(evs), st.prevs)
	}
	for i, e := range evs {
		if !e.HasPrev || string(e.PrevValue) != fmt.Sprint(i) || e.PrevMeta.Mod != uint64(i+1) {
			t.Fatalf("event %d: %s", i, showPrev(evs[i:i+1]))
		}
	}
}
