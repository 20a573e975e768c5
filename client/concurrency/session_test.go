package concurrency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/client/concurrency"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// TestNewSessionHonoursContext: NewSession's context bounds all of it. A
// node that grants the lease and then answers no keepalive (stalled), with
// the caller's context cancelled meanwhile, must make NewSession return
// with the caller's context.Canceled. It ignored the context after the
// grant: its first keepalive ran on a background context, so NewSession
// returned only at the client's RequestTimeout, with that deadline's
// error instead of the caller's.
func TestNewSessionHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := kvdtest.FakeNode(t, func(req *wire.Request, d transport.Descriptor) (resp wire.Response, act kvdtest.FakeAct) {
		switch req.Op {
		case wire.OpHello:
			resp.Value = kvdtest.LeaderHello(d)
		case wire.OpLeaseGrant:
			resp.Version = 7
		case wire.OpLeaseKeepAlive:
			cancel() // the caller gives up while the keepalive waits
			return resp, kvdtest.FakeHang
		default:
			resp.Status = wire.StatusBadRequest
		}
		return resp, kvdtest.FakeReply
	})
	c, err := client.New(client.Config{Endpoints: []string{addr}, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := concurrency.NewSession(ctx, c, concurrency.Config{})
	if err == nil {
		s.Close(context.Background())
		t.Fatal("NewSession succeeded without a keepalive answered")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("NewSession: %v; want the caller's context.Canceled", err)
	}
}
