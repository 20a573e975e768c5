package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
)

func watchMsg(t *testing.T, w *watcher, from uint64, skip *int, created *bool, progress uint64, flags uint8, evs ...wire.WatchEvent) error {
	t.Helper()
	resp := wire.Response{Op: wire.OpWatch, Version: progress,
		Value: wire.AppendWatchMessage(nil, &wire.WatchMessage{Flags: flags, Events: evs})}
	return w.message(context.Background(), &resp, from, skip, created)
}

func ev(v uint64, key string) wire.WatchEvent {
	return wire.WatchEvent{Type: wire.EventPut, Key: []byte(key), Value: []byte("v"), Version: v}
}

func drained(w *watcher) string {
	var out []string
	for {
		select {
		case r := <-w.out:
			for _, e := range r.Events {
				out = append(out, fmt.Sprintf("%d:%s", e.ModRevision, e.Key))
			}
		default:
			return strings.Join(out, " ")
		}
	}
}

// TestWatchResumeInsideVersion: a stream that breaks after part of a
// transaction's events (a message cut inside its version) resumes from
// that version, leaving out the events already delivered: none twice,
// none lost.
func TestWatchResumeInsideVersion(t *testing.T) {
	w := &watcher{key: []byte("k/"), prefix: true, out: make(chan WatchResponse, 10)}
	from, skip := w.resumeAt()
	created := false
	if from != 0 || skip != 0 {
		t.Fatalf("first stream from %d skip %d, want from now", from, skip)
	}
	if err := watchMsg(t, w, from, &skip, &created, 10, wire.WatchCreated); err != nil {
		t.Fatal(err)
	}
	// Version 12 is cut: the server says the stream is whole through 11.
	if err := watchMsg(t, w, from, &skip, &created, 11, 0, ev(11, "k/a"), ev(12, "k/x")); err != nil {
		t.Fatal(err)
	}
	from, skip = w.resumeAt()
	if from != 12 || skip != 1 {
		t.Fatalf("resume at %d skipping %d, want 12 skipping 1", from, skip)
	}
	created = false
	if err := watchMsg(t, w, from, &skip, &created, 11, wire.WatchCreated); err != nil {
		t.Fatal(err)
	}
	if err := watchMsg(t, w, from, &skip, &created, 13, 0, ev(12, "k/x"), ev(12, "k/y"), ev(13, "k/z")); err != nil {
		t.Fatal(err)
	}
	if got, want := drained(w), "11:k/a 12:k/x 12:k/y 13:k/z"; got != want {
		t.Fatalf("delivered %q, want %q", got, want)
	}
	if from, skip = w.resumeAt(); from != 14 || skip != 0 {
		t.Fatalf("resume at %d skipping %d, want 14 skipping 0", from, skip)
	}
	// An event already delivered, or outside the prefix, is a malformed reply.
	for _, e := range []wire.WatchEvent{ev(13, "k/z"), ev(14, "other")} {
		if err := watchMsg(t, w, 14, new(int), &created, 14, 0, e); !errors.Is(err, errMalformedReply) {
			t.Errorf("event %d %s: %v, want a malformed reply", e.Version, e.Key, err)
		}
	}
}

// TestCompactedError: the typed error matches ErrCompacted and names the
// versions.
func TestCompactedError(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", watchStatusError(&wire.Response{Status: wire.StatusCompacted, Version: 40, Value: []byte("gone")}, 3))
	var ce *CompactedError
	if !errors.Is(err, ErrCompacted) || !errors.As(err, &ce) || ce.Oldest != 40 || ce.Requested != 3 ||
		!strings.HasPrefix(err.Error(), "wrapped: kvd: mvcc: required revision has been compacted") {
		t.Fatalf("%v", err)
	}
}

// TestWatchProgressMoves: an empty message moves the resume point.
func TestWatchProgressMoves(t *testing.T) {
	w := &watcher{key: []byte("k"), out: make(chan WatchResponse, 1)}
	created, skip := false, 0
	if err := watchMsg(t, w, 0, &skip, &created, 10, wire.WatchCreated); err != nil {
		t.Fatal(err)
	}
	if err := watchMsg(t, w, 0, &skip, &created, 500, 0); err != nil {
		t.Fatal(err)
	}
	if from, skip := w.resumeAt(); from != 501 || skip != 0 || drained(w) != "" {
		t.Fatalf("resume at %d skipping %d", from, skip)
	}
}
