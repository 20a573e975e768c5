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

// TestWatchTxnOverHistory: a valid transaction bigger than a node's watch
// history bounds must reach a caught-up prefix watcher whole, and the
// watch goes on (it is not ended as compacted). By bytes: the smallest history
// the server accepts (HistoryBytes = wire.MaxWatchBytes, 1 MiB) and a
// two-PUT transaction of ~1 MiB in all. By events: a three-PUT transaction
// on a node keeping 2 events of history.
func TestWatchTxnOverHistory(t *testing.T) {
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
	v0, err := c.PutVersion(ctx, []byte("x"), []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Watch(ctx, []byte("w/"), client.WithPrefix(), client.WithFromVersion(v0+1))
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
				t.Fatalf("watch failed after %d of the %d events of transaction %d: %v", got, want, tr.Version, r.Err)
			}
			got += len(r.Events)
		case <-ctx.Done():
			t.Fatalf("got %d of %d events", got, want)
		}
	}
}
