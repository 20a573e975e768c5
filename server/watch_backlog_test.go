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
	v0, err := c.PutVersion(ctx, []byte("x"), []byte("0"))
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
	collect(t, c.Watch(ctx, []byte("w/"), client.WithPrefix(), client.WithFromVersion(v0+1)), n, 20*time.Second)
}
