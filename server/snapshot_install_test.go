package server_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/server"
)

// TestReadsAcrossSnapshotInstall restarts a follower that fell behind the
// leader's compacted log, so it installs a snapshot and rebuilds its
// region (slowly, so that readers meet it half-built), while clients keep
// reading from it: one-sided serializable GETs of its region (never a
// wrong value, never backwards, never a miss of a key it showed)
// and linearizable RPC GETs (never older than a write acknowledged before
// the read began).
func TestReadsAcrossSnapshotInstall(t *testing.T) {
	skipShort(t)
	const keys = 20
	var faults [3]server.Faults // by id-1
	knobs := func(id uint64) server.Knobs { return faults[id-1].KnobsFor(id) }
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{TableMem: 4 << 20, SnapshotCount: 50, ReuseGrace: 100 * time.Millisecond, Knobs: knobs})
	lead := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	var f *kvdtest.Node
	for _, n := range nodes {
		if n != lead {
			f = n
			break
		}
	}
	w := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	var acked [keys]atomic.Int64 // highest acknowledged seq per key
	var seq atomic.Int64
	put := func() error {
		s := seq.Add(1)
		k := int(s) % keys
		if err := w.Put(ctx, []byte(key(k)), []byte(fmt.Sprintf("%s-%d", key(k), s))); err != nil {
			return err
		}
		for cur := acked[k].Load(); cur < s && !acked[k].CompareAndSwap(cur, s); cur = acked[k].Load() {
		}
		return nil
	}
	for range keys {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	waitApplied(t, f, lead)
	f.Stop()
	for range 400 { // compacts the leader's log past what f has
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	faults[f.ID-1].SlowRebuilds(20 * time.Millisecond) // readers meet the region half-built
	gen0 := f.Srv.TableHeader().Generation

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var oneSided, rpcs atomic.Int64
	wg.Add(3)
	go func() { // writer
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := put(); err != nil && !errors.Is(err, client.ErrUnavailable) {
				errs <- err
				return
			}
		}
	}()
	go func() { // one-sided serializable reads of f's region
		defer wg.Done()
		c := newClient(t, []string{f.Addr}, client.Serializable)
		var last [keys]int64 // -1: not seen yet
		for {
			select {
			case <-stop:
				oneSided.Store(int64(c.Stats().OneSided))
				return
			default:
			}
			k := rand.IntN(keys)
			before := c.Stats().OneSided
			v, err := c.Get(ctx, []byte(key(k)))
			if c.Stats().OneSided == before {
				// Answered by RPC, which may have gone to the leader: a
				// serializable read promises no order across nodes.
				continue
			}
			switch {
			case errors.Is(err, client.ErrNotFound):
				if last[k] > 0 {
					errs <- fmt.Errorf("%s: miss after seeing seq %d", key(k), last[k])
					return
				}
				continue
			case err != nil:
				continue // f may be restarting its region: unavailable is fine
			}
			s, err := parseSeq(k, v)
			if err != nil {
				errs <- err
				return
			}
			if s < last[k] {
				errs <- fmt.Errorf("%s: seq %d after %d: went backwards", key(k), s, last[k])
				return
			}
			last[k] = s
		}
	}()
	go func() { // linearizable RPC reads at f
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			k := rand.IntN(keys)
			min := acked[k].Load()
			v, ok := rawGet(t, f.Addr, []byte(key(k)), wire.ReadIndex, 2*time.Second)
			if !ok {
				continue
			}
			rpcs.Add(1)
			s, err := parseSeq(k, v)
			if err != nil {
				errs <- err
				return
			}
			if s < min {
				errs <- fmt.Errorf("%s: linearizable read at the follower returned seq %d, %d was acknowledged before it began", key(k), s, min)
				return
			}
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for f.Srv.TableHeader().Generation == gen0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	installed := f.Srv.TableHeader().Generation != gen0
	time.Sleep(time.Second) // keep reading the rebuilt region
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !installed {
		t.Fatal("the follower never installed a snapshot (its region was never rebuilt)")
	}
	if oneSided.Load() == 0 || rpcs.Load() == 0 {
		t.Fatalf("reads did not happen: %d one-sided, %d RPC", oneSided.Load(), rpcs.Load())
	}
	t.Logf("%d one-sided and %d RPC reads across the snapshot install", oneSided.Load(), rpcs.Load())
}

func key(k int) string { return "key" + strconv.Itoa(k) }

func parseSeq(k int, v []byte) (int64, error) {
	rest, ok := strings.CutPrefix(string(v), key(k)+"-")
	s, err := strconv.ParseInt(rest, 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("%s: wrong value %q", key(k), v)
	}
	return s, nil
}

// waitApplied waits until f applied everything the leader committed.
func waitApplied(t *testing.T, f, lead *kvdtest.Node) {
	t.Helper()
	wait.For(t, "the follower to catch up", func() bool {
		return f.Srv.Node().Status().Applied >= lead.Srv.Node().Status().Commit
	})
}
