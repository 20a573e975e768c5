package client_test

import (
	"context"
	"sync"
	"testing"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/wire"
)

// TestPutBatchOnServersWithoutIt: against a server that does not announce
// put batches in its hello (one that predates them closes the connection
// on the op), PutBatch sends its PUTs one by one, in order, each with its
// own outcome, and never the batch.
func TestPutBatchOnServersWithoutIt(t *testing.T) {
	var (
		mu     sync.Mutex
		values []string
	)
	f := startFake(t, func(req *wire.Request) reaction {
		if req.Op != wire.OpPut {
			return answer(wire.StatusBadRequest, "unexpected "+req.Op.String())
		}
		mu.Lock()
		defer mu.Unlock()
		values = append(values, string(req.Value))
		if string(req.Value) == "bad" {
			return answer(wire.StatusNoSpace, "")
		}
		return reaction{resp: wire.Response{Version: uint64(10 + len(values))}}
	})
	c, err := client.New(client.Config{Endpoints: []string{f.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	puts := []client.BatchPut{{Key: []byte("k"), Value: []byte("1")}, {Key: []byte("k"), Value: []byte("bad")}, {Key: []byte("k"), Value: []byte("3")}}
	rs, err := c.PutBatch(context.Background(), puts)
	if err != nil || len(rs) != 3 {
		t.Fatalf("PutBatch: %+v, %v", rs, err)
	}
	if rs[0].Revision != 11 || rs[0].Err != nil || rs[1].Err == nil || rs[2].Revision != 13 || rs[2].Err != nil {
		t.Fatalf("results %+v; want 11, an error, 13", rs)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := f.seen.Load(); got != 3 || len(values) != 3 || values[2] != "3" {
		t.Fatalf("the server saw %d PUTs %v; want the 3, in order", got, values)
	}
}
