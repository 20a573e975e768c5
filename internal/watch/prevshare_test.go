package watch

import "testing"

// TestSharedPrevReadsReadEachPreviousValueOnce: PrevKV watchers of one key
// that share a PrevReads read each event's previous value from the store
// once among them, and each gets it; after Clear it is read again. Without
// one, each watcher reads its own.
func TestSharedPrevReadsReadEachPreviousValueOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		share     bool
		wantReads int // for 10 watchers of 2 events
	}{
		{"shared", true, 2},
		{"apart", false, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &fakeStore{}
			h := newHub(t, Config{Store: st})
			st.publish(h, put(1, "k", "1"))
			var p PrevReads
			opts := []Option{PrevKV()}
			if tc.share {
				opts = append(opts, SharePrev(&p))
			}
			var ws []*Watcher
			for range 10 {
				w, err := h.Watch([]byte("k"), false, 0, opts...)
				if err != nil {
					t.Fatal(err)
				}
				ws = append(ws, w)
			}
			st.publish(h, put(2, "k", "2"))
			st.publish(h, put(3, "k", "3"))
			for i, w := range ws {
				evs, _, err := w.Next(nil, 100, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := showPrev(evs), "2:PUT:k=2<1@1 3:PUT:k=3<2@2 "; got != want {
					t.Fatalf("watcher %d: %s, want %s", i, got, want)
				}
			}
			if st.prevs != tc.wantReads {
				t.Fatalf("%d reads of a previous value, want %d", st.prevs, tc.wantReads)
			}
			if !tc.share {
				return
			}
			p.Clear()
			st.publish(h, put(4, "k", "4"))
			for _, w := range ws[:2] {
				if _, _, err := w.Next(nil, 100, 1<<20); err != nil {
					t.Fatal(err)
				}
			}
			if st.prevs != tc.wantReads+1 {
				t.Fatalf("after Clear: %d reads, want %d", st.prevs, tc.wantReads+1)
			}
		})
	}
}

// TestSharedPrevReadsAreBounded: a PrevReads keeps no more than its bound
// of values; reads past it still answer, uncached.
func TestSharedPrevReadsAreBounded(t *testing.T) {
	st := &fakeStore{}
	h := newHub(t, Config{Store: st})
	big := string(make([]byte, maxPrevReadsBytes/2))
	st.publish(h, put(1, "a", big), put(1, "b", big), put(1, "c", big))
	var p PrevReads
	w, err := h.Watch([]byte(""), true, 0, PrevKV(), SharePrev(&p))
	if err != nil {
		t.Fatal(err)
	}
	st.publish(h, put(2, "a", "x"))
	st.publish(h, put(3, "b", "x"))
	st.publish(h, put(4, "c", "x"))
	evs, _, err := w.Next(nil, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if len(e.PrevValue) != len(big) {
			t.Fatalf("event %d: previous value of %d bytes, want %d", e.Version, len(e.PrevValue), len(big))
		}
	}
	if p.bytes > maxPrevReadsBytes || len(p.m) != 1 {
		t.Fatalf("holds %d values of %d bytes, want 1 within %d", len(p.m), p.bytes, maxPrevReadsBytes)
	}
}
