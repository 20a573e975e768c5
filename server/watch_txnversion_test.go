package server_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/watch"
	"github.com/kvd-project/kvd/internal/wire"
)

// TestWatchTxnOverHistoryBytes: with the smallest history the server
// accepts (HistoryBytes = wire.MaxWatchBytes, 1 MiB), a valid two-PUT
// transaction of ~1 MiB in all must reach a caught-up prefix watcher:
// both events, then the watch goes on. It ends the watch as compacted.
func TestWatchTxnOverHistoryBytes(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{Watch: watch.Config{HistoryBytes: wire.MaxWatchBytes}})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v0, err := c.PutVersion(ctx, []byte("x"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Watch(ctx, []byte("w/"), client.WithPrefix(), client.WithFromVersion(v0+1))
	a, b := bytes.Repeat([]byte("a"), 600000), bytes.Repeat([]byte("b"), 449576)
	tr, err := c.Txn(ctx, client.Txn{Then: []client.Op{client.OpPut([]byte("w/a"), a), client.OpPut([]byte("w/b"), b)}})
	if err != nil {
		t.Fatalf("txn: %v", err)
	}
	got := 0
	for got < 2 {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %d of the transaction's events", got)
			}
			if r.Err != nil {
				t.Fatalf("watch failed after %d of the 2 events of transaction %d: %v", got, tr.Version, r.Err)
			}
			got += len(r.Events)
		case <-ctx.Done():
			t.Fatalf("got %d of 2 events", got)
		}
	}
}

// TestWatchTxnOverHistoryEvents: the same with the event bound: a
// three-PUT transaction on a node keeping 2 events of history.
func TestWatchTxnOverHistoryEvents(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{Watch: watch.Config{HistoryEvents: 2}})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v0, err := c.PutVersion(ctx, []byte("x"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Watch(ctx, []byte("w/"), client.WithPrefix(), client.WithFromVersion(v0+1))
	tr, err := c.Txn(ctx, client.Txn{Then: []client.Op{client.OpPut([]byte("w/a"), []byte("1")),
		client.OpPut([]byte("w/b"), []byte("2")), client.OpPut([]byte("w/c"), []byte("3"))}})
	if err != nil {
		t.Fatalf("txn: %v", err)
	}
	got := 0
	for got < 3 {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %d of the transaction's events", got)
			}
			if r.Err != nil {
				t.Fatalf("watch failed after %d of the 3 events of transaction %d: %v", got, tr.Version, r.Err)
			}
			got += len(r.Events)
		case <-ctx.Done():
			t.Fatalf("got %d of 3 events", got)
		}
	}
}
