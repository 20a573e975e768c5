package putgroup_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/putgroup"
)

// TestCancelledPutFailsNoOtherInItsGroup: the PUT that commits a group
// is given up by its caller (a cancelled gRPC call) while the group is
// being committed; the other PUTs in the group still succeed.
func TestCancelledPutFailsNoOtherInItsGroup(t *testing.T) {
	kc := startClient(t, 3)

	// The first two groups are held at BeforeCommit until released.
	calls := make(chan int, 10)
	gates := []chan struct{}{make(chan struct{}), make(chan struct{})}
	releases := []func(){sync.OnceFunc(func() { close(gates[0]) }), sync.OnceFunc(func() { close(gates[1]) })}
	defer releases[0]()
	defer releases[1]()
	var mu sync.Mutex
	n := 0
	g, err := putgroup.New(putgroup.Config{Client: kc, Knobs: putgroup.Knobs{BeforeCommit: func(size int) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		calls <- size
		if i < len(gates) {
			<-gates[i]
		}
	}}})
	if err != nil {
		t.Fatal(err)
	}

	bg := context.Background()
	errs := make(chan error, 3)
	put := func(ctx context.Context, key string) {
		_, err := g.Put(ctx, []byte(key), []byte("v"))
		errs <- err
	}
	go put(bg, "held")
	if got := <-calls; got != 1 {
		t.Fatalf("first group of %d, want 1", got)
	}
	ctxA, cancelA := context.WithCancel(bg)
	defer cancelA()
	go put(ctxA, "a")
	wait.For(t, "a waiting", func() bool { return g.Waiting() == 1 })
	go put(bg, "b")
	wait.For(t, "b waiting", func() bool { return g.Waiting() == 2 })
	releases[0]()
	if got := <-calls; got != 2 {
		t.Fatalf("second group of %d, want 2 (a commits it, b in it)", got)
	}
	cancelA()
	releases[1]()
	for range 3 {
		if err := <-errs; err != nil {
			t.Errorf("put: %v", err)
		}
	}
	if _, err := kc.Get(bg, []byte("b")); err != nil {
		t.Errorf("get b: %v", err)
	}
}

// startClient starts an n-node in-process cluster and returns a client of
// it, closed when the test ends.
func startClient(t *testing.T, n int) *client.Client {
	t.Helper()
	nodes := kvdtest.StartCluster(t, n, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 30*time.Second)
	kc, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kc.Close() })
	return kc
}
