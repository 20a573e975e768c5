package concurrency_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/client/concurrency"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

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
		r := txn.Response{CompareVersions: []uint64{lateVersion}}
		if !f.held.Load() {
			r = txn.Response{Succeeded: true, CompareVersions: []uint64{0}, Results: []txn.Result{{Version: 9}}}
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
		}
	default:
		resp.Status = wire.StatusBadRequest
	}
	return resp, kvdtest.FakeReply
}

// TestLockAfterLateCreate: Lock's create times out (maybe applied), the
// ownership check reads the key missing, and the create then commits: the
// session holds the lock key. Every later attempt conflicts with that key,
// which Lock must recognise as its own; it used to wait until its context
// ended, the lock held by its own session all along.
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
