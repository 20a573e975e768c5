package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestGetManyCluster reads 25 keys from a real node over TCP: every answer
// right, two READ round trips per batch of 7 keys, no RPC.
func TestGetManyCluster(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, ct := newCountingClient(t, kvdtest.Endpoints(nodes))
	ctx := context.Background()
	var keys [][]byte
	for i := range 25 {
		k := []byte(fmt.Sprintf("mget-%02d", i))
		keys = append(keys, k)
		if i%5 != 4 {
			if err := c.Put(ctx, k, []byte("v-"+string(k))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 25 keys = 4 batches. (A clock sample may add a message; a GET of
	// any key by RPC would add one per key.) On a loaded machine a batch
	// may be judged too slow for its lease and its keys read one by one,
	// so the count is taken from the best of a few tries: the point is that
	// an undisturbed GetMany takes 8.
	var reads, sends int64
	for try := 0; try < 5; try++ {
		r0, s0 := ct.reads.Load(), ct.sends.Load()
		res, err := c.GetMany(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		reads, sends = ct.reads.Load()-r0, ct.sends.Load()-s0
		for i, r := range res {
			want := i%5 != 4
			if r.Found != want || want && string(r.Value) != "v-"+string(keys[i]) || want && r.ModRevision == 0 {
				t.Errorf("%s: %+v, want found=%v", keys[i], r, want)
			}
		}
		if reads == 8 && sends <= 1 {
			return
		}
		t.Logf("try %d: %d READ round trips, %d messages", try, reads, sends)
	}
	t.Fatalf("GetMany of 25 keys took %d READ round trips and %d messages, want 8 and no GET by RPC", reads, sends)
}
