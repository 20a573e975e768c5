//go:build rdma

package rdma

import (
	"context"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// The CQs are armed for solicited completions only (poller.go, "Arming"):
// a READ reaped by its own spinning reader raises no completion event, so
// one-sided reads do not wake the reaper. With every completion armed,
// each READ raised one.
func TestReadsRaiseNoEvents(t *testing.T) {
	c, s, ct, st := pair(t, Config{})
	r := newRegion(t, st, 1<<16)
	ops := []transport.ReadOp{{Remote: r.Descriptor(), Dst: make([]byte, 64)}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A message first: its event makes the reaper re-arm the CQ, which is
	// what must not arm it for every completion.
	if err := s.Send(ctx, []byte("hello")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if _, err := c.Recv(ctx, nil); err != nil {
		t.Fatalf("Recv: %v", err)
	}
	const reads = 400
	before := ct.cqEvents.Load()
	for range reads {
		if err := c.Read(ctx, ops); err != nil {
			t.Fatalf("Read: %v", err)
		}
	}
	events := ct.cqEvents.Load() - before
	t.Logf("%d READs, %d completion events", reads, events)
	if events > reads/10 {
		t.Fatalf("%d completion events for %d READs: READ completions raise events", events, reads)
	}
}

// A reader that does not spin sleeps at once; its READ's completion raises
// no event unless the reader arms the CQ for it (sleepOn). Without that the
// Reads below would time out (keepalives, whose arming would reap them
// late, are off).
func TestReadWithoutSpinWakes(t *testing.T) {
	c, _, ct, st := pair(t, Config{SpinPoll: -1, KeepAlive: -1})
	r := newRegion(t, st, 1<<16)
	ops := []transport.ReadOp{{Remote: r.Descriptor(), Offset: 128, Dst: make([]byte, 256)}}
	before := ct.cqEvents.Load()
	for i := range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Read(ctx, ops)
		cancel()
		if err != nil {
			t.Fatalf("Read %d: %v", i, err)
		}
	}
	t.Logf("100 READs without spinning, %d completion events", ct.cqEvents.Load()-before)
}
