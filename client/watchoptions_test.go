package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
)

// TestWatchJoinsFragments: the pieces of a revision the server split
// (WatchMsgFragment) reach the caller as one response, with the revision
// that follows in the last piece's message; a stream that breaks between
// pieces resumes at that revision, none of it delivered.
func TestWatchJoinsFragments(t *testing.T) {
	w := &watcher{key: []byte("k/"), prefix: true, out: make(chan WatchResponse, 10)}
	created, skip := false, 0
	if err := watchMsg(t, w, 0, &skip, &created, 10, wire.WatchCreated); err != nil {
		t.Fatal(err)
	}
	if err := watchMsg(t, w, 0, &skip, &created, 11, wire.WatchMsgFragment, ev(11, "k/a"), ev(12, "k/b")); err != nil {
		t.Fatal(err)
	}
	if got := drained(w); got != "" {
		t.Fatalf("delivered %q before the revision's last piece", got)
	}
	if from, skip := w.resumeAt(); from != 11 || skip != 0 {
		t.Fatalf("resume at %d skipping %d, want 11 skipping 0", from, skip)
	}
	if err := watchMsg(t, w, 0, &skip, &created, 11, wire.WatchMsgFragment, ev(12, "k/c")); err != nil {
		t.Fatal(err)
	}
	if err := watchMsg(t, w, 0, &skip, &created, 13, 0, ev(12, "k/d"), ev(13, "k/e")); err != nil {
		t.Fatal(err)
	}
	var r WatchResponse
	select {
	case r = <-w.out:
	default:
	}
	if len(r.Events) != 5 || r.Revision != 13 {
		t.Fatalf("got %d events at %d in one response, want 5 at 13", len(r.Events), r.Revision)
	}
	if from, skip := w.resumeAt(); from != 14 || skip != 0 {
		t.Fatalf("resume at %d skipping %d, want 14", from, skip)
	}
}

// TestWatchProgressNotification: a progress message reaches the caller as
// a response that says so, with its revision, and moves the resume point.
func TestWatchProgressNotification(t *testing.T) {
	w := &watcher{key: []byte("k"), out: make(chan WatchResponse, 1)}
	created, skip := false, 0
	if err := watchMsg(t, w, 0, &skip, &created, 10, wire.WatchCreated); err != nil {
		t.Fatal(err)
	}
	if err := watchMsg(t, w, 0, &skip, &created, 42, wire.WatchMsgProgress); err != nil {
		t.Fatal(err)
	}
	var r WatchResponse
	select {
	case r = <-w.out:
	default:
	}
	if !r.IsProgressNotify() || r.Revision != 42 || len(r.Events) != 0 {
		t.Fatalf("got %+v, want a progress notification at 42", r)
	}
	if from, _ := w.resumeAt(); from != 43 {
		t.Fatalf("resume at %d, want 43", from)
	}
}

// TestWatchAgainstServerWithoutFlags: a server that predates the newer
// watch flags refuses them as unknown. The watch resumes there without
// the newest (events' metadata); refused again, a plain watch resumes
// without any, and one that needs prev_kv or progress_notify fails saying
// why, rather than run without them.
func TestWatchAgainstServerWithoutFlags(t *testing.T) {
	refusal := &wire.Response{Status: wire.StatusBadRequest, Value: []byte("wire: malformed watch: unknown flags 0x8")}
	for _, tc := range []struct {
		name string
		w    *watcher
		fail bool
	}{
		{"plain", &watcher{key: []byte("k")}, false},
		{"prev_kv", &watcher{key: []byte("k"), prevKV: true}, true},
		{"progress_notify", &watcher{key: []byte("k"), progressNotify: true}, true},
	} {
		n := &node{addr: "old:1"}
		flags, err := tc.w.requestFlags(n)
		if err != nil || flags&wire.WatchFragment == 0 || flags&wire.WatchMeta == 0 {
			t.Fatalf("%s: first flags %#x %v", tc.name, flags, err)
		}
		if err := tc.w.refused(n, refusal, flags, 1); !errors.Is(err, errWatchOverflow) {
			t.Errorf("%s: refused with metadata: %v, want a resume", tc.name, err)
		}
		flags, err = tc.w.requestFlags(n)
		if err != nil || flags&wire.WatchMeta != 0 || flags&wire.WatchFragment == 0 || flags&tc.w.optionFlags() != tc.w.optionFlags() {
			t.Fatalf("%s: flags without metadata %#x %v", tc.name, flags, err)
		}
		err = tc.w.refused(n, refusal, flags, 1)
		switch {
		case tc.fail && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "predates")):
			t.Errorf("%s: %v, want a bad request saying the server predates it", tc.name, err)
		case !tc.fail && !errors.Is(err, errWatchOverflow):
			t.Errorf("%s: %v, want a resume", tc.name, err)
		}
		if flags, err := tc.w.requestFlags(n); !tc.fail && (err != nil || flags != 0) {
			t.Errorf("%s: flags on the old server %#x %v, want none", tc.name, flags, err)
		}
		// A late refusal of the first request does not undo what the
		// second one learned.
		n.oldWatch.refused(wire.WatchMeta)
		if n.oldWatch.age.Load() != watchOld {
			t.Errorf("%s: age %d after a late refusal, want %d", tc.name, n.oldWatch.age.Load(), watchOld)
		}
	}
	// Another refusal stays what it was.
	other := &wire.Response{Status: wire.StatusBadRequest, Value: []byte("too many watches on this connection")}
	w := &watcher{key: []byte("k")}
	if err := w.refused(&node{addr: "x"}, other, wire.WatchFragment, 1); !errors.Is(err, ErrBadRequest) {
		t.Errorf("other refusal: %v", err)
	}
}
