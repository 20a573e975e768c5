package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestStalledNodeErrorIsNoDeadline: when the stall watchdog closes a node
// whose one-sided READs stopped completing, a write waiting on that node
// fails as maybe applied (ErrUnavailable) — but its error must not claim
// context.DeadlineExceeded: the caller's context has not ended, and
// errors.Is(err, context.DeadlineExceeded) is how a caller tells that its
// own deadline passed. It did (errStalled wrapped DeadlineExceeded, for
// the client's own bookkeeping). RemoveMember is used because it has no
// attempt timeout of its own: only the watchdog ends its wait.
func TestStalledNodeErrorIsNoDeadline(t *testing.T) {
	got := make(chan struct{}, 1)
	addr := kvdtest.FakeNode(t, func(req *wire.Request, d transport.Descriptor) (resp wire.Response, act kvdtest.FakeAct) {
		switch req.Op {
		case wire.OpHello:
			resp.Value = kvdtest.LeaderHello(d)
		case wire.OpClock:
			resp.Version = uint64(time.Hour)
		case wire.OpMemberRemove:
			got <- struct{}{}
			return resp, kvdtest.FakeHang
		default:
			resp.Status = wire.StatusNotFound
		}
		return resp, kvdtest.FakeReply
	})
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ft := &freezingTransport{Transport: tr, frozen: map[string]bool{}}
	c, err := client.New(client.Config{Endpoints: []string{addr}, Transport: ft, AttemptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Get(ctx, []byte("x"), client.WithConsistency(client.Serializable)); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("warm-up GET: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.RemoveMember(ctx, 2) }()
	<-got
	ft.freeze(addr) // the node stalls: its READs stop completing
	go func() {
		gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
		defer gcancel()
		c.Get(gctx, []byte("x"), client.WithConsistency(client.Serializable))
	}()
	err = <-done
	if ctx.Err() != nil {
		t.Fatalf("the watchdog never ended the wait: %v", err)
	}
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("RemoveMember on a stalled node: %v, want ErrUnavailable (maybe applied)", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RemoveMember: %v matches context.DeadlineExceeded, but the caller's context is live", err)
	}
}
