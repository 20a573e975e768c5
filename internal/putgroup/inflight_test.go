package putgroup_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/putgroup"
)

// TestSeveralGroupsInFlight: with MaxInFlight 3, three groups commit at
// once, and the PUTs that queue meanwhile are handed on each once: every
// PUT returns, each with a revision of its own (Revisions).
func TestSeveralGroupsInFlight(t *testing.T) {
	kc := startClient(t, 1)
	const inFlight, n = 3, 60
	var holding atomic.Int32
	release := make(chan struct{})
	g, err := putgroup.New(putgroup.Config{Client: kc, Revisions: true, MaxInFlight: inFlight,
		Knobs: putgroup.Knobs{BeforeCommit: func(int) {
			if holding.Add(1) <= inFlight {
				<-release // the first groups wait, all in flight, while the rest queue
			}
		}}})
	if err != nil {
		t.Fatal(err)
	}
	revs := make([]uint64, n)
	var wg sync.WaitGroup
	put := func(i int) {
		defer wg.Done()
		rev, err := g.Put(context.Background(), []byte(fmt.Sprint("k", i%7)), []byte(fmt.Sprint(i)))
		if err != nil {
			t.Errorf("put %d: %v", i, err)
		}
		revs[i] = rev
	}
	wg.Add(n)
	for i := range inFlight {
		go put(i)
	}
	wait.For(t, "three groups in flight", func() bool { return holding.Load() == inFlight })
	for i := inFlight; i < n; i++ {
		go put(i)
	}
	wait.For(t, "the other PUTs to queue", func() bool { return g.Waiting() == n-inFlight })
	close(release)
	wg.Wait()
	seen := map[uint64]bool{}
	for i, r := range revs {
		if r == 0 || seen[r] {
			t.Fatalf("put %d: revision %d (0 or another PUT's)", i, r)
		}
		seen[r] = true
	}
}
