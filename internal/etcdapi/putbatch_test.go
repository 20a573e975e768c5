package etcdapi_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvd-project/kvd/internal/etcdapi"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestConcurrentPutsBatchedWithOwnRevisions: Puts that arrive while one
// is committed go together in the next batch, and each still has a
// revision of its own, as in etcd: the headers' revisions are distinct
// and dense, two Puts of one key are two versions, clientv3 reads the
// last values, and a watch sees one event per Put at its revision.
func TestConcurrentPutsBatchedWithOwnRevisions(t *testing.T) {
	const n, keys = 20, 15
	var armed, held atomic.Bool
	release := make(chan struct{})
	e := start(t, 3, etcdapi.Config{Knobs: etcdapi.Knobs{BeforePutGroup: func(int) {
		if armed.CompareAndSwap(true, false) {
			held.Store(true)
			<-release // the first group waits while the others queue
		}
	}}})
	ctx, c := context.Background(), e.etcd
	base := put(t, c, "base", "0")
	armed.Store(true)
	revs := make([]int64, n)
	var wg sync.WaitGroup
	do := func(i int) {
		defer wg.Done()
		r, err := c.Put(ctx, fmt.Sprintf("b/%02d", i%keys), fmt.Sprint(i))
		if err != nil {
			t.Errorf("put %d: %v", i, err)
			return
		}
		revs[i] = r.Header.Revision
	}
	wg.Add(n)
	go do(0)
	wait.For(t, "the first Put's group to be held", held.Load)
	for i := 1; i < n; i++ {
		go do(i)
	}
	g := e.srv.PutGroup()
	wait.For(t, "the other Puts to queue", func() bool { return g.Waiting() == n-1 })
	close(release)
	wg.Wait()
	if st := g.Stats(); st.Groups != 1 || st.Grouped != n-1 {
		t.Fatalf("groups %+v; want the %d queued Puts in one batch", st, n-1)
	}
	seen := map[int64]int{}
	for i, r := range revs {
		if r <= base || r > base+n {
			t.Fatalf("put %d: revision %d, want one in (%d, %d]", i, r, base, base+n)
		}
		if j, dup := seen[r]; dup {
			t.Fatalf("puts %d and %d share revision %d", j, i, r)
		}
		seen[r] = i
	}
	for k := range keys {
		key := fmt.Sprintf("b/%02d", k)
		last, puts := k, 0 // the key's Put with the highest revision: its value
		for i := k; i < n; i += keys {
			puts++
			if revs[i] > revs[last] {
				last = i
			}
		}
		r, err := c.Get(ctx, key)
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("get %s: %v, %v", key, r, err)
		}
		kv := r.Kvs[0]
		if want := fmt.Sprint(last); string(kv.Value) != want || kv.ModRevision != revs[last] || kv.Version != int64(puts) {
			t.Fatalf("%s = %s at %d version %d; want %s at %d version %d", key, kv.Value, kv.ModRevision, kv.Version, want, revs[last], puts)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wc := c.Watch(wctx, "b/", clientv3.WithPrefix(), clientv3.WithRev(base+1))
	var events int
	for events < n {
		wr, ok := <-wc
		if !ok || wr.Err() != nil {
			t.Fatalf("watch ended after %d events: %v", events, wr.Err())
		}
		for _, ev := range wr.Events {
			i, ok := seen[ev.Kv.ModRevision]
			if !ok || string(ev.Kv.Value) != fmt.Sprint(i) || ev.Type != clientv3.EventTypePut {
				t.Fatalf("event %s %s=%s at %d; no such Put", ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
			}
			delete(seen, ev.Kv.ModRevision)
			events++
		}
	}
}
