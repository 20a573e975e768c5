package concurrency_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/client/concurrency"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

func newClient(t *testing.T, nodes []*kvdtest.Node) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// critical is the shared resource the lock guards: it records who is
// inside, and any second entrant, and checks the fencing tokens rise.
type critical struct {
	holder     atomic.Int64
	overlaps   atomic.Int64
	entries    atomic.Int64
	lastFence  atomic.Uint64
	staleFence atomic.Int64
}

func (c *critical) enter(id int64, fence uint64) {
	if !c.holder.CompareAndSwap(0, id) {
		c.overlaps.Add(1)
	}
	if prev := c.lastFence.Swap(fence); prev >= fence {
		c.staleFence.Add(1)
	}
	c.entries.Add(1)
}

func (c *critical) exit(id int64) {
	if !c.holder.CompareAndSwap(id, 0) {
		c.overlaps.Add(1)
	}
}

// TestMutexUnderLeaderKill: clients contend for one lock on a 3-node
// cluster whose leader is stopped and restarted twice. No two are ever
// inside at once, every holder enters only while its session is certainly
// alive, and the fencing tokens of successive holders rise.
func TestMutexUnderLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping a leader-kill fault test in -short mode")
	}
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	var cs critical
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var lost atomic.Int64 // holders that found their session lost and stopped claiming
	for i := 1; i <= 4; i++ {
		c := newClient(t, nodes)
		wg.Add(1)
		go func(id int64) {
			defer wg.Done()
			contend(t, c, id, &cs, &lost, stop)
		}(int64(i))
	}
	for range 2 {
		time.Sleep(1500 * time.Millisecond) // contention under this leader
		lead := kvdtest.WaitLeader(t, nodes, 20*time.Second)
		lead.Stop()
		kvdtest.WaitLeader(t, nodes, 20*time.Second)
		if err := lead.Start(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // and under the last
	close(stop)
	wg.Wait()
	if n := cs.overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping critical sections", n)
	}
	if n := cs.staleFence.Load(); n != 0 {
		t.Fatalf("%d holders entered with a fencing token not above the last one", n)
	}
	if cs.entries.Load() < 4 {
		t.Fatalf("only %d critical sections in the whole run", cs.entries.Load())
	}
	t.Logf("%d critical sections, %d sessions lost", cs.entries.Load(), lost.Load())
}

// contend loops: session, lock, critical section, unlock, until stop. A
// holder enters only if its session is certainly alive, and a session
// that ends (its lease lost) is replaced.
func contend(t *testing.T, c *client.Client, id int64, cs *critical, lost *atomic.Int64, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	var s *concurrency.Session
	for ctx.Err() == nil {
		if s == nil {
			var err error
			if s, err = concurrency.NewSession(ctx, c, concurrency.Config{TTL: 5 * time.Second}); err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		m := concurrency.NewMutex(s, "lock")
		err := m.Lock(ctx)
		switch {
		case errors.Is(err, concurrency.ErrSessionExpired):
			lost.Add(1)
			s = nil
			continue
		case err != nil:
			continue
		}
		if m.Held() {
			cs.enter(id, m.Version())
			time.Sleep(5 * time.Millisecond)
			cs.exit(id)
		} else {
			lost.Add(1) // the lease may be gone: act as if not holding
		}
		uctx, ucancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := m.Unlock(uctx); err != nil && !errors.Is(err, client.ErrConflict) {
			// Maybe not released: the lease's end releases it.
			s.Close(uctx)
			s = nil
		}
		ucancel()
	}
	if s != nil {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.Close(cctx)
		ccancel()
	}
}

// TestMutexLostLease: a holder whose lease is revoked from outside stops
// holding (Held false once its session learns), another session takes the
// lock, and the old holder's Unlock leaves the new holder's key alone
// (its version, the fencing token, no longer matches).
func TestMutexLostLease(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, nodes)
	ctx := context.Background()
	cfg := concurrency.Config{TTL: 3 * time.Second}
	a, err := concurrency.NewSession(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := concurrency.NewSession(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	ma, mb := concurrency.NewMutex(a, "lock"), concurrency.NewMutex(b, "lock")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if err := mb.Lock(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock while held: %v", err)
	}
	cancel()
	if err := c.Revoke(ctx, a.Lease()); err != nil {
		t.Fatal(err)
	}
	if err := mb.Lock(ctx); err != nil {
		t.Fatalf("Lock after the holder's lease was revoked: %v", err)
	}
	wait.For(t, "the old holder to learn its lease is gone", func() bool { return !ma.Held() })
	if mb.Version() <= ma.Version() {
		t.Fatalf("fencing token did not rise: %d then %d", ma.Version(), mb.Version())
	}
	if err := ma.Unlock(ctx); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("old holder's Unlock: %v, want a conflict", err)
	}
	if !mb.Held() {
		t.Fatal("the old holder's Unlock released the new holder's lock")
	}
	if err := mb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// lateCreate is a one-node server, spoken to by hand, whose first lock
// create is applied but never answered (the client's attempt times out:
// maybe applied) and commits only after the client's ownership check has
// read the lock key missing. The session's lease id is 7; the lock key
// then holds "7" at lateVersion.
type lateCreate struct {
	held, checked atomic.Bool
	txns          atomic.Int64
	addr          string
}

const lateVersion = 5

func startLateCreate(t *testing.T) *lateCreate {
	f := &lateCreate{}
	f.addr = kvdtest.FakeNode(t, f.answer)
	return f
}

func (f *lateCreate) answer(req *wire.Request, d transport.Descriptor) (resp wire.Response, act kvdtest.FakeAct) {
	switch req.Op {
	case wire.OpHello:
		resp.Value = kvdtest.LeaderHello(d)
	case wire.OpLeaseGrant:
		resp.Version = 7
	case wire.OpLeaseKeepAlive:
		resp.Version = uint64(10 * time.Second)
	case wire.OpLeaseRevoke:
	case wire.OpTxn: // the create-if-missing
		if f.txns.Add(1) == 1 {
			return resp, kvdtest.FakeHang // applied, but the answer is lost
		}
		r := txn.Response{Compared: []revision.Meta{{Mod: lateVersion}}}
		if !f.held.Load() {
			r = txn.Response{Succeeded: true, Compared: []revision.Meta{{Mod: 0}}, Results: []txn.Result{{Meta: revision.Meta{Mod: 9}}}}
			f.held.Store(true)
		}
		resp.Value = txn.AppendResponse(nil, &r)
	case wire.OpGet:
		switch {
		case string(req.Key) != "lock":
			resp.Status = wire.StatusNotFound
		case !f.checked.Swap(true):
			resp.Status = wire.StatusNotFound // the check, just before the create commits
			f.held.Store(true)
		default:
			resp.Value, resp.Version = []byte("7"), lateVersion
			if req.Flags&wire.GetMeta != 0 {
				resp.Value = append(revision.Meta{Create: lateVersion, Mod: lateVersion, Version: 1}.Append(nil), "7"...)
			}
		}
	default:
		resp.Status = wire.StatusBadRequest
	}
	return resp, kvdtest.FakeReply
}

// TestLockAfterLateCreate: Lock's create times out (maybe applied), the
// ownership check reads the key missing, and the create then commits: the
// session holds the lock key. Every later attempt conflicts with that key,
// which Lock must recognise as its own, or it would wait until its
// context ended, the lock held by its own session all along.
func TestLockAfterLateCreate(t *testing.T) {
	f := startLateCreate(t)
	c, err := client.New(client.Config{Endpoints: []string{f.addr}, AttemptTimeout: 300 * time.Millisecond,
		Consistency: client.ReadIndex})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := concurrency.NewSession(ctx, c, concurrency.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := concurrency.NewMutex(s, "lock")
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v (create attempts %d; the key is this session's at version %d)", err, f.txns.Load(), lateVersion)
	}
	if m.Version() != lateVersion || !f.checked.Load() {
		t.Fatalf("Version %d, want %d (ownership checked: %v)", m.Version(), lateVersion, f.checked.Load())
	}
}
