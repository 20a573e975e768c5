package etcdapi_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvd-project/kvd/internal/etcdapi"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestConcurrentPutsShareRevisionsButNotKeys holds a Put's group while
// other clients' Puts queue behind it: distinct keys commit as one
// transaction (one revision), and a key already in a group starts the
// next one, so each Put keeps a revision and a watch event of its own.
func TestConcurrentPutsShareRevisionsButNotKeys(t *testing.T) {
	sizes := make(chan int, 100)
	hold := make(chan struct{})
	var held atomic.Bool
	release := sync.OnceFunc(func() { close(hold) })
	e := start(t, 3, etcdapi.Config{Knobs: etcdapi.Knobs{BeforePutGroup: func(n int) {
		sizes <- n
		if held.CompareAndSwap(false, true) {
			<-hold
		}
	}}})
	t.Cleanup(release)
	ctx := context.Background()
	start, err := e.etcd.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	puts := [][2]string{{"held", "x"}, {"a", "1"}, {"b", "1"}, {"a", "2"}}
	revs := make([]int64, len(puts))
	var wg sync.WaitGroup
	for i, p := range puts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.etcd.Put(ctx, p[0], p[1])
			if err != nil {
				t.Errorf("put %s=%s: %v", p[0], p[1], err)
				return
			}
			revs[i] = r.Header.Revision
		}()
		if i == 0 {
			wait.For(t, "the first Put's group to be held", held.Load)
		} else {
			wait.For(t, "Puts waiting", func() bool { return e.srv.WaitingPuts() == i })
		}
	}
	release()
	wg.Wait()
	var got []int
	for len(sizes) > 0 {
		got = append(got, <-sizes)
	}
	if !slices.Equal(got, []int{1, 2, 1}) {
		t.Errorf("groups %v, want [1 2 1]", got)
	}
	if revs[1] != revs[2] || revs[3] <= revs[2] || revs[1] <= revs[0] {
		t.Errorf("revisions %v: want a=1 and b=1 at one, after held's, and a=2 after them", revs)
	}
	if r, err := e.etcd.Get(ctx, "a"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "2" {
		t.Errorf("get a: %v %v, want 2", r, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang fails rather than blocks
	defer cancel()
	wc := e.etcd.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1))
	var events []string
	for resp := range wc {
		for _, ev := range resp.Events {
			events = append(events, string(ev.Kv.Key)+"="+string(ev.Kv.Value))
		}
		if len(events) >= len(puts) {
			break
		}
	}
	slices.Sort(events[1:3])
	if want := []string{"held=x", "a=1", "b=1", "a=2"}; !slices.Equal(events, want) {
		t.Errorf("watch events %v, want %v", events, want)
	}
}
