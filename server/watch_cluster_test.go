package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestWatchResumesAcrossLeaderKill is the end-to-end test of watches: a prefix watch streams from the leader while a writer writes
// continuously; the leader is killed mid-stream; the client resumes the
// watch on another node by itself. The events delivered must be every
// acknowledged write, once each, in commit order, with its value and
// version; a write whose outcome the writer does not know may appear
// (once) or not; nothing else may.
func TestWatchResumesAcrossLeaderKill(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	leader := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	eps := append([]string{leader.Addr}, kvdtest.Endpoints(othersThan(nodes, leader))...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wc := newClient(t, eps, client.Linearizable) // the watch's own client: its leader is the first endpoint
	c := newClient(t, eps, client.Linearizable)
	v0, err := c.PutRevision(ctx, []byte("k/start"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	col := kvdtest.CollectWatch(wc.Watch(ctx, []byte("k/"), client.WithPrefix(), client.WithFromRevision(v0+1)))
	h := &kvdtest.WatchHistory{}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		kvdtest.WatchWriter(ctx, c, "k/", h, &stop)
	}()
	wait.For(t, "the watch to deliver 200 events from the leader", func() bool { n, _ := col.Seen(); return n >= 200 })
	n, last := col.Seen()
	t.Logf("killing leader %d after %d events (version %d)", leader.ID, n, last)
	leader.Stop()
	before, _ := h.Acked()
	wait.For(t, "200 writes acknowledged after the kill", func() bool { n, _ := h.Acked(); return n >= before+200 })
	stop.Store(true)
	<-done
	kvdtest.FinishWatch(t, col, h, cancel, 15*time.Second)
}

// TestWatchLeavesIsolatedNode: the node a watch streams from (the leader)
// is cut off from the others. It applies nothing more, so it must end the
// watch once it knows it has no leader, and the client must resume on the
// new majority and deliver the write made there.
func TestWatchLeavesIsolatedNode(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	old := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	rest := othersThan(nodes, old)
	eps := append([]string{old.Addr}, kvdtest.Endpoints(rest)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newClient(t, eps, client.Linearizable)
	v0, err := c.PutRevision(ctx, []byte("iso"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	ch := newClient(t, eps, client.Linearizable).Watch(ctx, []byte("iso"), client.WithFromRevision(v0))
	if got := collect(t, ch, 1, 10*time.Second); got[0] != fmt.Sprintf("%d PUT iso=0", v0) {
		t.Fatalf("first event %q", got)
	}
	old.Isolate(rest...)
	t.Cleanup(func() { old.Rejoin(rest...) })
	leader := kvdtest.WaitLeader(t, rest, 20*time.Second)
	v1, err := newClient(t, []string{leader.Addr}, client.Linearizable).PutRevision(ctx, []byte("iso"), []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, ch, 1, 30*time.Second); got[0] != fmt.Sprintf("%d PUT iso=1", v1) {
		t.Fatalf("event after the isolation: %q", got)
	}
}

// TestWatchFromRevisionBeforeRestart: a node that restarted after a
// revision still serves a watch from it, out of its stored history: the
// events come in revision order, each write once, with its revision, and
// the watch goes on with new writes.
func TestWatchFromRevisionBeforeRestart(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	leader := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	var want []string
	var first uint64
	for i := range 20 {
		key := fmt.Sprintf("r/%d", i%4)
		rev, err := c.PutRevision(ctx, []byte(key), []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = rev
		}
		want = append(want, fmt.Sprintf("%d %s=%d", rev, key, i))
	}
	if err := c.Delete(ctx, []byte("r/0")); err != nil {
		t.Fatal(err)
	}
	follower := othersThan(nodes, leader)[0]
	follower.Stop()
	if err := follower.Start(); err != nil {
		t.Fatal(err)
	}
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	wc := newClient(t, []string{follower.Addr}, client.Serializable)
	ch := wc.Watch(ctx, []byte("r/"), client.WithPrefix(), client.WithFromRevision(first))
	var got []string
	for len(got) < len(want)+1 {
		resp, ok := <-ch
		if !ok || resp.Err != nil {
			t.Fatalf("watch ended after %d events: %v", len(got), resp.Err)
		}
		for _, e := range resp.Events {
			got = append(got, fmt.Sprintf("%d %s=%s", e.ModRevision, e.Key, e.Value))
		}
	}
	if fmt.Sprint(got[:len(want)]) != fmt.Sprint(want) || !strings.HasSuffix(got[len(want)], " r/0=") {
		t.Fatalf("events from revision %d on the restarted node:\n%v\nwant\n%v and the delete of r/0", first, got, want)
	}
}
