package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/server"
)

// prevLine is an event with its previous value and that value's mod
// revision (- for none).
func prevLine(e client.Event) string {
	prev := "-"
	if p := e.PrevKV; p != nil {
		prev = fmt.Sprintf("%s@%d/v%d", p.Value, p.ModRevision, p.Version)
	}
	return fmt.Sprintf("%d %s %s=%s prev %s", e.ModRevision, e.Type, e.Key, e.Value, prev)
}

// next reads ch's next response, failing on an error or once ctx ends.
func nextResponse(t *testing.T, ctx context.Context, ch <-chan client.WatchResponse) client.WatchResponse {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok || r.Err != nil {
			t.Fatalf("watch ended: %v", r.Err)
		}
		return r
	case <-ctx.Done():
		t.Fatal("no watch response")
	}
	return client.WatchResponse{}
}

// prevLines reads n events of ch as prevLine.
func prevLines(t *testing.T, ctx context.Context, ch <-chan client.WatchResponse, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		for _, e := range nextResponse(t, ctx, ch).Events {
			got = append(got, prevLine(e))
		}
	}
	return got
}

// TestWatchPrevKVLiveAndFromHistory: with WithPrevKV every event carries
// the key as it was just before it, absent for a key that did not exist:
// the events a restarted node serves from its stored history and the
// live ones alike.
func TestWatchPrevKVLiveAndFromHistory(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	put := func(k, v string) uint64 {
		t.Helper()
		rev, err := c.PutRevision(ctx, []byte(k), []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	r1 := put("p", "1")
	r2 := put("p", "2")
	if err := c.Delete(ctx, []byte("p")); err != nil {
		t.Fatal(err)
	}
	r3 := r2 + 1
	r4 := put("p", "3")
	n.Stop() // its memory of the events is gone: they come from disk
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	ch := c.Watch(ctx, []byte("p"), client.WithFromRevision(r1), client.WithPrevKV())
	plain := c.Watch(ctx, []byte("p"), client.WithFromRevision(r1))
	got := prevLines(t, ctx, ch, 4)
	r5 := put("p", "4") // live, from memory
	got = append(got, prevLines(t, ctx, ch, 1)...)
	want := []string{
		fmt.Sprintf("%d PUT p=1 prev -", r1),
		fmt.Sprintf("%d PUT p=2 prev 1@%d/v1", r2, r1),
		fmt.Sprintf("%d DELETE p= prev 2@%d/v2", r3, r2),
		fmt.Sprintf("%d PUT p=3 prev -", r4),
		fmt.Sprintf("%d PUT p=4 prev 3@%d/v1", r5, r4),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("prev_kv events:\n%q\nwant\n%q", got, want)
	}
	if got := prevLines(t, ctx, plain, 5); got[1] != fmt.Sprintf("%d PUT p=2 prev -", r2) {
		t.Fatalf("a watch without WithPrevKV got %q", got)
	}
}

// TestWatchRequestProgressWhileQuiet: Client.RequestProgress tells a watch
// whose key sees no writes how far its stream is complete: a progress
// notification at or past the other keys' writes.
func TestWatchRequestProgressWhileQuiet(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ch := c.Watch(ctx, []byte("quiet"))
	rev, err := c.PutRevision(ctx, []byte("noise"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		// Asked again each time a response is not yet the one: the watch
		// may not have been created when it was first asked.
		if err := c.RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		r, ok := waitResponse(rctx, ch)
		rcancel()
		if ok && len(r.Events) > 0 {
			t.Fatalf("events for a key nobody wrote: %+v", r.Events)
		}
		if ok && r.IsProgressNotify() && r.Revision >= rev {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("no progress notification")
		}
	}
}

// waitResponse is ch's next response, if one comes before ctx ends.
func waitResponse(ctx context.Context, ch <-chan client.WatchResponse) (client.WatchResponse, bool) {
	select {
	case r, ok := <-ch:
		return r, ok && r.Err == nil
	case <-ctx.Done():
		return client.WatchResponse{}, false
	}
}

// TestWatchPeriodicProgressNotify: a watch made WithProgressNotify is told
// its progress every interval while quiet (a short one, by the knob); a
// watch without it never is.
func TestWatchPeriodicProgressNotify(t *testing.T) {
	knobs := func(uint64) server.Knobs { return server.Knobs{WatchProgressNotifyInterval: 50 * time.Millisecond} }
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{Knobs: knobs})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	plain := c.Watch(ctx, []byte("quiet"))
	ch := c.Watch(ctx, []byte("quiet"), client.WithProgressNotify())
	rev, err := c.PutRevision(ctx, []byte("noise"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		r := nextResponse(t, ctx, ch)
		if !r.IsProgressNotify() || len(r.Events) > 0 {
			t.Fatalf("not a progress notification: %+v", r)
		}
		if r.Revision >= rev {
			break
		}
	}
	select {
	case r := <-plain:
		t.Fatalf("a watch without progress_notify got %+v", r)
	default:
	}
}

// TestWatchFragmentedRevisionIsOneResponse: a revision of more events than
// one server message holds (a range delete of more keys than
// MaxWatchEvents) reaches the caller as one response, whole.
func TestWatchFragmentedRevisionIsOneResponse(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	const keys = 1500 // past wire.MaxWatchEvents (1000)
	var last uint64
	for i := 0; i < keys; i += 64 {
		var ops []client.Op
		for j := i; j < min(i+64, keys); j++ {
			ops = append(ops, client.OpPut([]byte(fmt.Sprintf("f/%04d", j)), []byte("v")))
		}
		r, err := c.Txn(ctx, client.Txn{Then: ops})
		if err != nil {
			t.Fatal(err)
		}
		last = r.Revision
	}
	// From the revision after the puts, not from now: the watch is opened
	// in the background and may begin after the delete.
	ch := c.Watch(ctx, []byte("f/"), client.WithPrefix(), client.WithFromRevision(last+1))
	del, err := c.DeleteRange(ctx, []byte("f/"), []byte("f0"))
	if err != nil {
		t.Fatal(err)
	}
	r := nextResponse(t, ctx, ch)
	if len(r.Events) != keys || r.Revision < del.Revision {
		t.Fatalf("the range delete of %d keys came as a response of %d events (revision %d)", keys, len(r.Events), r.Revision)
	}
	for _, e := range r.Events {
		if e.Type != client.EventDelete || e.ModRevision != del.Revision {
			t.Fatalf("event %+v, want a delete at %d", e, del.Revision)
		}
	}
}

// TestWatchPrevKVOfManyWatchesOnOneConnection: prev_kv watches of one
// connection, which share the previous values the node reads for them,
// each get their own events' previous values: watches of one key from
// different revisions, and of another key beside them.
func TestWatchPrevKVOfManyWatchesOnOneConnection(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	put := func(k, v string) uint64 {
		t.Helper()
		rev, err := c.PutRevision(ctx, []byte(k), []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	a1 := put("a", "1")
	b1 := put("b", "1")
	a2 := put("a", "2")
	watches := []struct {
		key  string
		from uint64
		want []string
	}{
		{"a", a1, []string{fmt.Sprintf("%d PUT a=1 prev -", a1), fmt.Sprintf("%d PUT a=2 prev 1@%d/v1", a2, a1)}},
		{"a", a2, []string{fmt.Sprintf("%d PUT a=2 prev 1@%d/v1", a2, a1)}},
		{"b", b1, []string{fmt.Sprintf("%d PUT b=1 prev -", b1)}},
	}
	var chs []<-chan client.WatchResponse
	for range 5 {
		for _, w := range watches {
			chs = append(chs, c.Watch(ctx, []byte(w.key), client.WithFromRevision(w.from), client.WithPrevKV()))
		}
	}
	for i, ch := range chs {
		w := watches[i%len(watches)]
		if got := prevLines(t, ctx, ch, len(w.want)); fmt.Sprint(got) != fmt.Sprint(w.want) {
			t.Fatalf("watch %d of %s from %d:\n%q\nwant\n%q", i, w.key, w.from, got, w.want)
		}
	}
	a3, b2 := put("a", "3"), put("b", "2")
	for i, ch := range chs {
		want := fmt.Sprintf("%d PUT a=3 prev 2@%d/v2", a3, a2)
		if watches[i%len(watches)].key == "b" {
			want = fmt.Sprintf("%d PUT b=2 prev 1@%d/v1", b2, b1)
		}
		if got := prevLines(t, ctx, ch, 1); got[0] != want {
			t.Fatalf("watch %d, live: %q, want %q", i, got[0], want)
		}
	}
}
