package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/watch"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// eventLine is an event as the tests compare them.
func eventLine(e client.Event) string {
	return fmt.Sprintf("%d %s %s=%s", e.ModRevision, e.Type, e.Key, e.Value)
}

// collect reads n events from ch, failing on an error or after wait.
func collect(t *testing.T, ch <-chan client.WatchResponse, n int, wait time.Duration) []string {
	t.Helper()
	var got []string
	timeout := time.After(wait)
	for len(got) < n {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %d events: %q", len(got), got)
			}
			if r.Err != nil {
				t.Fatalf("watch failed after %d events: %v", len(got), r.Err)
			}
			for _, e := range r.Events {
				got = append(got, eventLine(e))
			}
		case <-timeout:
			t.Fatalf("got %d events within %v, want %d: %q", len(got), wait, n, got)
		}
	}
	return got
}

// TestWatchEvents: a prefix watch from now sees PUTs, DELETEs and a
// transaction's writes in commit order with the versions the writes got;
// a delete of an absent key and writes outside the prefix are no events; a
// key watch sees its key only; a watch from an earlier version replays.
func TestWatchEvents(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// From the version after a first write, rather than from now: Watch
	// returns before its stream is open, so "now" could be after the puts.
	v0, err := c.PutRevision(ctx, []byte("x"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	pw := c.Watch(ctx, []byte("w/"), client.WithPrefix(), client.WithFromRevision(v0+1))
	kw := c.Watch(ctx, []byte("w/b"), client.WithFromRevision(v0+1))
	v1, err := c.PutRevision(ctx, []byte("w/a"), []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutRevision(ctx, []byte("x"), []byte("outside")); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, []byte("w/absent")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("delete of an absent key: %v", err)
	}
	tr, err := c.Txn(ctx, client.Txn{Then: []client.Op{client.OpPut([]byte("w/b"), []byte("2")), client.OpDelete([]byte("w/a"))}})
	if err != nil {
		t.Fatal(err)
	}
	v3, err := c.PutRevision(ctx, []byte("w/b"), []byte("3"))
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, pw, 4, 10*time.Second)
	want := []string{
		fmt.Sprintf("%d PUT w/a=1", v1), fmt.Sprintf("%d PUT w/b=2", tr.Revision),
		fmt.Sprintf("%d DELETE w/a=", tr.Revision), fmt.Sprintf("%d PUT w/b=3", v3),
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("prefix watch:\n got %q\nwant %q", got, want)
	}
	if got := collect(t, kw, 2, 10*time.Second); strings.Join(got, "|") != strings.Join([]string{want[1], want[3]}, "|") {
		t.Fatalf("key watch: %q", got)
	}
	// From a version: the history replays, the first write excluded.
	replay := c.Watch(ctx, []byte("w/"), client.WithPrefix(), client.WithFromRevision(v1+1))
	if got := collect(t, replay, 3, 10*time.Second); strings.Join(got, "|") != strings.Join(want[1:], "|") {
		t.Fatalf("watch from %d: %q", v1+1, got)
	}
}

// TestWatchCompacted: a watch from a revision the memory's bounded history
// no longer holds is served from the stored history; one from a revision
// the cluster compacted fails with a *CompactedError naming the oldest
// revision a watch can start from, and a watch from that one works.
func TestWatchCompacted(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{Watch: watch.Config{HistoryEvents: 5}})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var first uint64
	for i := range 20 {
		v, err := c.PutRevision(ctx, []byte("k"), []byte{byte('a' + i)})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = v
		}
	}
	if got := collect(t, c.Watch(ctx, []byte("k"), client.WithFromRevision(first)), 20, 10*time.Second); !strings.HasSuffix(got[0], "k=a") {
		t.Fatalf("watch from %d, before the memory's history: %q", first, got)
	}
	if err := c.Compact(ctx, first+10); err != nil {
		t.Fatal(err)
	}
	r := <-c.Watch(ctx, []byte("k"), client.WithFromRevision(first))
	var ce *client.CompactedError
	if !errors.Is(r.Err, client.ErrCompacted) || !errors.As(r.Err, &ce) || ce.Oldest != first+11 || ce.Requested != first {
		t.Fatalf("watch from %d: %+v, want ErrCompacted with the oldest version held", first, r)
	}
	t.Logf("compacted: %v", r.Err)
	got := collect(t, c.Watch(ctx, []byte("k"), client.WithFromRevision(ce.Oldest)), 9, 10*time.Second)
	if !strings.HasPrefix(got[0], fmt.Sprint(ce.Oldest)+" PUT k=") || !strings.HasSuffix(got[8], "k=t") {
		t.Fatalf("watch from the oldest version %d: %q", ce.Oldest, got)
	}
}

// TestWatchSlowWatcherCatchesUp: a client that does not read its watch
// while the memory's history moves past what it has not received is not
// dropped: once it reads again, it gets every event, in order, the ones
// the memory no longer holds from the stored history. The node holds
// nothing for it meanwhile but the bounded history.
func TestWatchSlowWatcherCatchesUp(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{ReuseGrace: 10 * time.Millisecond,
		Watch: watch.Config{HistoryBytes: wire.MaxWatchBytes}, Knobs: func(uint64) server.Knobs { return server.Knobs{ReplyTimeout: time.Minute} }})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newPatientClient(t, kvdtest.Endpoints(nodes), client.Linearizable) // 272 PUTs of 256 KiB, under -race
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	conn := rawWatch(t, ctx, n.Addr, 7, "big")
	// 256 KiB values: at most 4 events a message, 4 in the history. The
	// transport lets the server send 64 messages ahead of the reader, so
	// after 64*4 events the watch's sender waits, and the next 4 evict
	// what it has not sent.
	value := make([]byte, 256<<10)
	for i := range 64*4 + 16 {
		value[0] = byte(i)
		if err := c.Put(ctx, []byte("big"), value); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	var buf []byte
	var err error
	for next := 0; next < 64*4+16; {
		buf, err = conn.Recv(ctx, buf)
		if err != nil {
			t.Fatalf("the watch stopped after %d events: %v", next, err)
		}
		var resp wire.Response
		var m wire.WatchMessage
		if err := wire.DecodeResponse(buf, &resp); err != nil || resp.ID != 7 || resp.Status != wire.StatusOK ||
			wire.DecodeWatchMessage(resp.Value, &m) != nil {
			t.Fatalf("after %d events: message %+v (%q), %v", next, resp, resp.Value, err)
		}
		for _, e := range m.Events {
			if int(e.Value[0]) != next%256 {
				t.Fatalf("event %d has value %d: an event lost or repeated", next, e.Value[0])
			}
			next++
		}
	}
}

// TestWatchProgress: a watch whose key sees no writes is still told how
// far its stream is complete (an empty message, at most once a second),
// so that its client resumes from there rather than from a version the
// history may have evicted.
func TestWatchProgress(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := rawWatch(t, ctx, n.Addr, 3, "quiet")
	time.Sleep(1100 * time.Millisecond) // past progressEvery since the watch was created
	v, err := c.PutRevision(ctx, []byte("noise"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		buf, err := conn.Recv(ctx, nil)
		if err != nil {
			t.Fatalf("no progress message: %v", err)
		}
		var resp wire.Response
		var m wire.WatchMessage
		if err := wire.DecodeResponse(buf, &resp); err != nil || resp.Status != wire.StatusOK || wire.DecodeWatchMessage(resp.Value, &m) != nil {
			t.Fatalf("bad message %+v: %v", resp, err)
		}
		if len(m.Events) != 0 {
			t.Fatalf("events for a key nobody wrote: %+v", m.Events)
		}
		if m.Flags&wire.WatchCreated == 0 && resp.Version >= v {
			return // told it is complete through the noise write
		}
	}
}

// TestWatchLimits: a connection may open MaxWatchesPerConn watches (more:
// StatusBadRequest), the node Watch.MaxWatchers (more: StatusRetry, so
// the client tries elsewhere); a cancelled watch frees its place, and
// cancelling an unknown one is StatusNotFound.
func TestWatchLimits(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{MaxWatchesPerConn: 2, Watch: watch.Config{MaxWatchers: 3}})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	dial := func() func(req wire.Request) wire.Response {
		conn, err := tr.Dial(ctx, n.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return func(req wire.Request) wire.Response {
			t.Helper()
			if err := conn.Send(ctx, wire.AppendRequest(nil, &req)); err != nil {
				t.Fatal(err)
			}
			for {
				buf, err := conn.Recv(ctx, nil)
				var resp wire.Response
				if err != nil || wire.DecodeResponse(buf, &resp) != nil {
					t.Fatalf("answer to %d: %+v %v", req.ID, resp, err)
				}
				if resp.ID == req.ID && resp.Op == req.Op {
					return resp
				} // else a progress message of an open watch
			}
		}
	}
	open := func(id uint64) wire.Request {
		return wire.Request{Op: wire.OpWatch, ID: id, Key: []byte("k"), Value: wire.AppendWatchRequest(nil, 0)}
	}
	a, b := dial(), dial()
	for id := uint64(1); id <= 2; id++ {
		if r := a(open(id)); r.Status != wire.StatusOK {
			t.Fatalf("watch %d: status %d %s", id, r.Status, r.Value)
		}
	}
	if r := a(open(3)); r.Status != wire.StatusBadRequest || !strings.Contains(string(r.Value), "too many watches on this connection") {
		t.Fatalf("third watch on a connection: status %d %s", r.Status, r.Value)
	}
	if r := b(open(1)); r.Status != wire.StatusOK {
		t.Fatalf("third watch on the node: status %d %s", r.Status, r.Value)
	}
	if r := b(open(2)); r.Status != wire.StatusRetry || !strings.Contains(string(r.Value), "too many watches on this node") {
		t.Fatalf("fourth watch on the node: status %d %s", r.Status, r.Value)
	}
	cancelReq := wire.Request{Op: wire.OpWatchCancel, ID: 9, Value: wire.AppendWatchCancel(nil, 1)}
	if r := a(cancelReq); r.Status != wire.StatusOK {
		t.Fatalf("cancel: status %d %s", r.Status, r.Value)
	}
	if r := a(cancelReq); r.Status != wire.StatusNotFound {
		t.Fatalf("cancel again: status %d", r.Status)
	}
	if r := b(open(3)); r.Status != wire.StatusOK {
		t.Fatalf("a watch after a cancel freed a place: status %d %s", r.Status, r.Value)
	}
}

// TestWatchCallerFallsBehind: a caller that does not drain its watch while
// more than the client's queue (4 MiB) of events arrives still gets every
// event once, in order: the client stops the server's stream when its
// queue overflows and resumes it from the last event delivered.
func TestWatchCallerFallsBehind(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{ReuseGrace: 10 * time.Millisecond})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v0, err := c.PutRevision(ctx, []byte("start"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Watch(ctx, []byte("big"), client.WithFromRevision(v0+1))
	value := make([]byte, 256<<10)
	const n = 40 // 10 MiB of events, not read meanwhile
	var want []uint64
	for i := range n {
		value[0] = byte(i)
		v, err := c.PutRevision(ctx, []byte("big"), value)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	var got []uint64
	for len(got) < n {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatalf("after %d events: %v", len(got), r.Err)
			}
			for _, e := range r.Events {
				if e.Value[0] != byte(len(got)) {
					t.Fatalf("event %d carries value %d", len(got), e.Value[0])
				}
				got = append(got, e.ModRevision)
			}
		case <-ctx.Done():
			t.Fatalf("%d events of %d", len(got), n)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("versions %v, want %v", got, want)
	}
}

// rawWatch dials addr over a connection of its own (no client library) and
// starts a watch of key from now, with request id id; the connection closes
// when the test ends.
func rawWatch(t *testing.T, ctx context.Context, addr string, id uint64, key string) transport.Conn {
	t.Helper()
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	conn, err := tr.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := wire.Request{Op: wire.OpWatch, ID: id, Key: []byte(key), Value: wire.AppendWatchRequest(nil, 0)}
	if err := conn.Send(ctx, wire.AppendRequest(nil, &req)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestWatchBacklogNotPaced: a watch from an earlier version whose history
// holds more events than one message carries (wire.MaxWatchEvents, 1000)
// gets them back to back, not one message per progress tick while nothing
// new is written. The tick is made an hour long: a backlog paced by it
// never arrives within collect's timeout.
func TestWatchBacklogNotPaced(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{Knobs: func(uint64) server.Knobs { return server.Knobs{ProgressEvery: time.Hour} }})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v0, err := c.PutRevision(ctx, []byte("x"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	const txns = 60 // 60 × 64 = 3840 events: four messages
	n := 0
	for i := range txns {
		ops := make([]client.Op, client.MaxTxnOps)
		for j := range ops {
			ops[j] = client.OpPut(fmt.Appendf(nil, "w/%02d/%02d", i, j), []byte("v"))
		}
		if _, err := c.Txn(ctx, client.Txn{Then: ops}); err != nil {
			t.Fatal(err)
		}
		n += len(ops)
	}
	collect(t, c.Watch(ctx, []byte("w/"), client.WithPrefix(), client.WithFromRevision(v0+1)), n, 20*time.Second)
}

// TestWatchTxnOverHistory: a valid transaction bigger than a node's watch
// history bounds must reach a caught-up prefix watcher whole, and the
// watch goes on (it is not ended as compacted). By bytes: the smallest history
// the server accepts (HistoryBytes = wire.MaxWatchBytes, 1 MiB) and a
// two-PUT transaction of ~1 MiB in all. By events: a three-PUT transaction
// on a node keeping 2 events of history.
func TestWatchTxnOverHistory(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		name string
		cfg  watch.Config
		ops  []client.Op
	}{
		{"bytes", watch.Config{HistoryBytes: wire.MaxWatchBytes}, []client.Op{
			client.OpPut([]byte("w/a"), bytes.Repeat([]byte("a"), 600000)),
			client.OpPut([]byte("w/b"), bytes.Repeat([]byte("b"), 449576))}},
		{"events", watch.Config{HistoryEvents: 2}, []client.Op{
			client.OpPut([]byte("w/a"), []byte("1")), client.OpPut([]byte("w/b"), []byte("2")),
			client.OpPut([]byte("w/c"), []byte("3"))}},
	} {
		t.Run(tc.name, func(t *testing.T) { testWatchTxnOverHistory(t, tc.cfg, tc.ops) })
	}
}

func testWatchTxnOverHistory(t *testing.T, cfg watch.Config, ops []client.Op) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{Watch: cfg})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v0, err := c.PutRevision(ctx, []byte("x"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Watch(ctx, []byte("w/"), client.WithPrefix(), client.WithFromRevision(v0+1))
	tr, err := c.Txn(ctx, client.Txn{Then: ops})
	if err != nil {
		t.Fatalf("txn: %v", err)
	}
	want, got := len(ops), 0
	for got < want {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %d of the transaction's events", got)
			}
			if r.Err != nil {
				t.Fatalf("watch failed after %d of the %d events of transaction %d: %v", got, want, tr.Revision, r.Err)
			}
			got += len(r.Events)
		case <-ctx.Done():
			t.Fatalf("got %d of %d events", got, want)
		}
	}
}

// TestWatchEventsCarryKeyMetadata: a PUT event carries the key's create
// revision, version and lease after the write (etcd's event kv), a DELETE
// event none of them, whether the watcher reads the events from memory or
// from the stored history (a history of two events holds none of them).
func TestWatchEventsCarryKeyMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  watch.Config
	}{
		{"memory", watch.Config{}},
		{"stored", watch.Config{HistoryEvents: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) { testWatchEventsCarryKeyMetadata(t, tc.cfg) })
	}
}

func testWatchEventsCarryKeyMetadata(t *testing.T, cfg watch.Config) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{Watch: cfg})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := c.Grant(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	put := func(v string, opts ...client.WriteOption) uint64 {
		t.Helper()
		rev, err := c.PutRevision(ctx, []byte("k"), []byte(v), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	r1 := put("1", client.WithLease(lease))
	r2 := put("2", client.WithLease(lease))
	r3 := put("3")
	del, err := c.DeleteRange(ctx, []byte("k"), []byte("k\x00"))
	if err != nil {
		t.Fatal(err)
	}
	rd := del.Revision
	r5 := put("5", client.WithLease(lease))
	for range 3 { // past a two-event history
		if _, err := c.PutRevision(ctx, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		fmt.Sprintf("%d PUT k=1 create %d version 1 lease %d", r1, r1, lease),
		fmt.Sprintf("%d PUT k=2 create %d version 2 lease %d", r2, r1, lease),
		fmt.Sprintf("%d PUT k=3 create %d version 3 lease 0", r3, r1),
		fmt.Sprintf("%d DELETE k= create 0 version 0 lease 0", rd),
		fmt.Sprintf("%d PUT k=5 create %d version 1 lease %d", r5, r5, lease),
	}
	var got []string
	ch := c.Watch(ctx, []byte("k"), client.WithFromRevision(r1))
	for len(got) < len(want) {
		r, ok := <-ch
		if !ok {
			t.Fatalf("watch closed after %q", got)
		}
		if r.Err != nil {
			t.Fatalf("watch failed after %q: %v", got, r.Err)
		}
		for _, e := range r.Events {
			got = append(got, fmt.Sprintf("%s create %d version %d lease %d", eventLine(e), e.CreateRevision, e.Version, e.Lease))
		}
	}
	if strings.Join(got[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
