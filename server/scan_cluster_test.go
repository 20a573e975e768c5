package server_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/wire"
)

// askScan sends one scan to one node (not through the client, which
// would move on to other nodes). err is non-nil if no answer came.
func askScan(t *testing.T, addr string, flags uint16, q rangeq.Request, wait time.Duration) (wire.Response, error) {
	t.Helper()
	return askRequest(t, addr, &wire.Request{Op: wire.OpScan, Flags: flags, Value: rangeq.Append(nil, &q)}, wait)
}

// TestDeposedLeaderScansNeedReadIndex: a leader cut off from the others is
// deposed and the new leader adds a key. A serializable scan of the old
// leader shows its stale state (that is what serializable means); a
// linearizable or readindex scan must fail or not answer, as RPC GETs
// must: served without ReadIndex it would miss an acknowledged write.
// A serializable scan of a follower of the new leader works.
func TestDeposedLeaderScansNeedReadIndex(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	old := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	rest := othersThan(nodes, old)
	ctx := context.Background()
	if err := newClient(t, []string{old.Addr}, client.Linearizable).Put(ctx, []byte("p/1"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	old.Isolate(rest...)
	t.Cleanup(func() { old.Rejoin(rest...) })
	leader := kvdtest.WaitLeader(t, rest, 20*time.Second)
	c := newClient(t, []string{leader.Addr}, client.Linearizable)
	if err := c.Put(ctx, []byte("p/2"), []byte("v2")); err != nil {
		t.Fatalf("put through the new leader %d: %v", leader.ID, err)
	}
	if r, err := c.Prefix(ctx, []byte("p/")); err != nil || len(r.KVs) != 2 {
		t.Fatalf("new leader: linearizable prefix scan = %+v, %v; want 2 keys", r, err)
	}
	q := rangeq.Request{Start: []byte("p/"), End: []byte("p0")}
	resp, err := askScan(t, old.Addr, wire.Serializable, q, 5*time.Second)
	var page wire.ScanResponse
	if err != nil || resp.Status != wire.StatusOK || wire.DecodeScanResponse(resp.Value, &page) != nil || len(page.KVs) != 1 {
		t.Fatalf("deposed leader %d: serializable scan = %+v, %v; want p/1 only (is the partition in place?)", old.ID, resp, err)
	}
	for _, tc := range []struct {
		name  string
		flags uint16
	}{{"linearizable", wire.Linearizable}, {"readindex", wire.ReadIndex}} {
		resp, err := askScan(t, old.Addr, tc.flags, q, 2*time.Second)
		switch {
		case err != nil && errors.Is(err, context.DeadlineExceeded):
		case err != nil:
			t.Errorf("deposed leader %d: %s scan: %v", old.ID, tc.name, err)
		case resp.Status == wire.StatusOK:
			t.Errorf("deposed leader %d answered a %s scan after the new leader %d wrote p/2: "+
				"it served its own state without confirming its leadership (ReadIndex)", old.ID, tc.name, leader.ID)
		}
	}
	for _, n := range rest {
		if n == leader {
			continue
		}
		wait.For(t, "the follower to apply p/2", func() bool {
			resp, err := askScan(t, n.Addr, wire.Serializable, q, 5*time.Second)
			var page wire.ScanResponse
			return err == nil && resp.Status == wire.StatusOK && wire.DecodeScanResponse(resp.Value, &page) == nil && len(page.KVs) == 2
		})
		fc := newClient(t, []string{n.Addr}, client.Serializable)
		if r, err := fc.Prefix(ctx, []byte("p/")); err != nil || len(r.KVs) != 2 {
			t.Fatalf("follower %d: serializable prefix scan through the client = %+v, %v", n.ID, r, err)
		}
	}
}

// scanOp is one write of a key's single writer: its n-th, a PUT of the
// value n or (del) a DELETE, and when it began and was acknowledged.
type scanOp struct {
	n          int
	del        bool
	start, end time.Time
}

// scanModel is the history of each key, written by one writer at a time
// in increasing n, so a key's states are ordered by n.
type scanModel struct {
	mu  sync.Mutex
	ops map[string][]scanOp
}

// check reports whether key read as got (the value n, or absent when
// absent) can be the key's state at some moment of [start, end]: it must
// be the state left by an op numbered between the last one acknowledged
// before start (L; 0 is the initial absence) and the last one begun
// before end (U).
func (m *scanModel) check(key string, got int, absent bool, start, end time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	lo, hi := 0, 0
	for _, op := range m.ops[key] {
		if !op.end.IsZero() && op.end.Before(start) {
			lo = max(lo, op.n)
		}
		if op.start.Before(end) {
			hi = max(hi, op.n)
		}
	}
	if !absent {
		if got < lo || got > hi {
			return fmt.Errorf("%s read as %d, outside [%d, %d] (acknowledged before the scan, begun before it ended)", key, got, lo, hi)
		}
		for _, op := range m.ops[key] {
			if op.n == got && !op.del {
				return nil
			}
		}
		return fmt.Errorf("%s read as %d, which no PUT wrote", key, got)
	}
	if lo == 0 {
		return nil // the initial absence is still possible
	}
	for _, op := range m.ops[key] {
		if op.del && op.n >= lo && op.n <= hi {
			return nil
		}
	}
	return fmt.Errorf("%s read as absent, but no DELETE in [%d, %d]", key, lo, hi)
}

// TestRangeScanAgainstModel: on a 3-node cluster, writers PUT and DELETE
// their own keys with increasing counters while scanners run linearizable
// scans of the whole prefix (in one page, and paged with a small limit):
// every key of every page must read as a state the key had at some moment
// of the page's request, and a key missing from a page must have been
// absent at some such moment.
func TestRangeScanAgainstModel(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.Addr)
	}
	const writers = 6
	m := &scanModel{ops: map[string][]scanOp{}}
	keys := make([]string, writers)
	for i := range keys {
		keys[i] = fmt.Sprintf("s/%d", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range writers {
		c := newClient(t, eps, client.Linearizable)
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := keys[i]
			for n := 1; ctx.Err() == nil; n++ {
				op := scanOp{n: n, del: n%4 == 0, start: time.Now()}
				m.mu.Lock()
				m.ops[key] = append(m.ops[key], op)
				idx := len(m.ops[key]) - 1
				m.mu.Unlock()
				var err error
				if op.del {
					err = c.Delete(context.Background(), []byte(key))
				} else {
					err = c.Put(context.Background(), []byte(key), []byte(strconv.Itoa(n)))
				}
				if err != nil {
					errs <- fmt.Errorf("write %s #%d: %w", key, n, err)
					return
				}
				m.mu.Lock()
				m.ops[key][idx].end = time.Now()
				m.mu.Unlock()
			}
		}()
	}
	var scans, pages atomic.Int64
	for s := range 2 {
		c := newClient(t, eps, client.Linearizable)
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit := 0
			if s == 1 {
				limit = 2 // paged: each page is checked against its own interval
			}
			for ctx.Err() == nil {
				from := []byte("s/")
				seen := map[string]bool{}
				for {
					start := time.Now()
					r, err := c.Range(context.Background(), from, []byte("s0"), client.WithLimit(limit))
					end := time.Now()
					if err != nil {
						errs <- fmt.Errorf("scan: %w", err)
						return
					}
					pages.Add(1)
					for _, kv := range r.KVs {
						n, err := strconv.Atoi(string(kv.Value))
						if err != nil {
							errs <- fmt.Errorf("%s: value %q", kv.Key, kv.Value)
							return
						}
						seen[string(kv.Key)] = true
						if err := m.check(string(kv.Key), n, false, start, end); err != nil {
							errs <- err
							return
						}
					}
					// Keys this page covered but did not return were absent.
					hi := "s0"
					if r.More {
						hi = string(r.Next)
					}
					for _, k := range keys {
						if k >= string(from) && k < hi && !seen[k] {
							if err := m.check(k, 0, true, start, end); err != nil {
								errs <- err
								return
							}
						}
					}
					if !r.More {
						break
					}
					from = r.Next
				}
				scans.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if scans.Load() < 10 {
		t.Fatalf("only %d scans ran", scans.Load())
	}
	m.mu.Lock()
	writes := 0
	for _, ops := range m.ops {
		writes += len(ops)
	}
	m.mu.Unlock()
	t.Logf("%d writes, %d scans in %d pages", writes, scans.Load(), pages.Load())
}
