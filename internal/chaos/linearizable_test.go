package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// history records operations from many goroutines.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	ok    atomic.Int64
	maybe atomic.Int64
}

func (h *history) now() int64 { return time.Since(h.start).Nanoseconds() }

func (h *history) add(clientID int, in kvInput, call int64, out kvOutput) {
	ret := h.now()
	if out.Unknown {
		ret = 1 << 62 // may take effect at any time after its call
		h.maybe.Add(1)
	} else {
		h.ok.Add(1)
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: clientID, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

// runClient issues random operations on a small key space until stop closes.
func runClient(h *history, id int, eps []string, keys int, stop <-chan struct{}) error {
	c, err := client.New(client.Config{Endpoints: eps, DialTimeout: 500 * time.Millisecond})
	if err != nil {
		return err
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(uint64(id), 42))
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return nil
		default:
		}
		in := kvInput{Key: fmt.Sprintf("k%d", rng.IntN(keys))}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		call := h.now()
		var out kvOutput
		switch r := rng.IntN(10); {
		case r < 5:
			in.Op = "get"
			v, err := c.Get(ctx, []byte(in.Key))
			switch {
			case err == nil:
				out = kvOutput{Value: string(v), Found: true}
			case errors.Is(err, client.ErrNotFound):
				out = kvOutput{}
			default:
				cancel()
				continue // a failed read has no effect: leave it out
			}
		case r < 9:
			in.Op, in.Value = "put", fmt.Sprintf("c%d-%d", id, seq)
			err := c.Put(ctx, []byte(in.Key), []byte(in.Value))
			out = kvOutput{Unknown: err != nil}
		default:
			in.Op = "del"
			err := c.Delete(ctx, []byte(in.Key))
			out = kvOutput{Found: err == nil, Unknown: err != nil && !errors.Is(err, client.ErrNotFound)}
		}
		cancel()
		h.add(id, in, call, out)
	}
}

// leaderOf asks every running node for its status and returns the leader.
func leaderOf(t *testing.T, pc *kvdtest.ProcCluster, timeout time.Duration) *kvdtest.Proc {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: pc.Endpoints(), DialTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, p := range pc.Procs {
			if !p.Running() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			st, err := c.Status(ctx, p.Addr)
			cancel()
			if err == nil && st.IsLeader && st.LeaseValid {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no leader within %v", timeout)
	return nil
}

func others(pc *kvdtest.ProcCluster, p *kvdtest.Proc) []*kvdtest.Proc {
	var out []*kvdtest.Proc
	for _, q := range pc.Procs {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

// isolate cuts p off from every other node, in both directions.
func isolate(t *testing.T, pc *kvdtest.ProcCluster, p *kvdtest.Proc) {
	t.Helper()
	var addrs []string
	for _, q := range others(pc, p) {
		addrs = append(addrs, q.Addr)
		if err := q.Partition(p.Addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Partition(addrs...); err != nil {
		t.Fatal(err)
	}
}

func healAll(t *testing.T, pc *kvdtest.ProcCluster) {
	t.Helper()
	for _, p := range pc.Procs {
		if p.Running() {
			if err := p.Heal(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestLinearizableUnderFaults runs concurrent clients against a 3-node
// cluster while it kills the leader, kills a follower, restarts them, and
// isolates the leader with a partition, then checks the history.
func TestLinearizableUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the fault test in -short mode")
	}
	pc := kvdtest.StartProcCluster(t, bin, 3)
	leaderOf(t, pc, 20*time.Second)

	h := &history{start: time.Now()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const clients, keys = 5, 4
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runClient(h, i, pc.Endpoints(), keys, stop); err != nil {
				errs <- err
			}
		}()
	}

	faults := []struct {
		name string
		do   func()
	}{
		{"SIGKILL leader, restart", func() {
			l := leaderOf(t, pc, 15*time.Second)
			l.Kill()
			time.Sleep(2 * time.Second)
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
		}},
		{"SIGKILL follower, restart", func() {
			l := leaderOf(t, pc, 15*time.Second)
			f := others(pc, l)[0]
			f.Kill()
			time.Sleep(2 * time.Second)
			if err := f.Start(); err != nil {
				t.Fatal(err)
			}
		}},
		{"partition the leader away, heal", func() {
			l := leaderOf(t, pc, 15*time.Second)
			isolate(t, pc, l)
			time.Sleep(3 * time.Second)
			healAll(t, pc)
		}},
		{"SIGKILL leader and a follower together, restart both", func() {
			l := leaderOf(t, pc, 15*time.Second)
			f := others(pc, l)[0]
			l.Kill()
			f.Kill()
			time.Sleep(time.Second)
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
			if err := f.Start(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	time.Sleep(time.Second)
	for _, f := range faults {
		t.Logf("fault: %s", f.name)
		f.do()
		time.Sleep(1500 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	h.mu.Lock()
	ops := h.ops
	h.mu.Unlock()
	res, info := porcupine.CheckOperationsVerbose(kvModel, ops, 2*time.Minute)
	t.Logf("checked %d operations (%d completed, %d maybe-applied) across %d faults: %s",
		len(ops), h.ok.Load(), h.maybe.Load(), len(faults), res)
	if h.ok.Load() < 100 {
		t.Errorf("only %d operations completed: the history checks too little", h.ok.Load())
	}
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), "kvd-linearizability.html")
		if err := porcupine.VisualizePath(kvModel, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatal("history is not linearizable")
	default:
		t.Fatalf("linearizability check inconclusive: %s", res)
	}
}
