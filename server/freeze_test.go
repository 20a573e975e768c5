package server_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestFreeze: a frozen node answers no RPC until it thaws (a request sent
// during the freeze is answered after it), while one-sided READs of its
// region go on being served, as an RDMA NIC serves them for a stopped
// process. It thaws by itself, and Close ends a freeze at once.
func TestFreeze(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	eps := kvdtest.Endpoints(nodes)
	ctx := context.Background()
	writer := newClient(t, eps, client.Linearizable)
	if err := writer.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	rpc := newClient(t, eps, client.ReadIndex)
	oneSided := newClient(t, eps, client.Serializable)
	for _, c := range []*client.Client{rpc, oneSided} { // connect before the freeze
		if v, err := c.Get(ctx, []byte("k")); err != nil || string(v) != "v1" {
			t.Fatalf("before the freeze: %q, %v", v, err)
		}
	}

	const freeze = 1500 * time.Millisecond
	start := time.Now()
	if err := n.Srv.Freeze(freeze); err != nil {
		t.Fatal(err)
	}
	thaw := start.Add(freeze)
	if err := n.Srv.Freeze(time.Second); !errors.Is(err, server.ErrFrozen) {
		t.Fatalf("second freeze: %v, want ErrFrozen", err)
	}

	// A READ from a connection made during the freeze sees the region.
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	conn, err := tr.Dial(ctxWithin(t, time.Second), n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	desc := n.Srv.Region().Descriptor()
	got := make([]byte, 64<<10)
	if err := conn.Read(ctxWithin(t, time.Second), []transport.ReadOp{{Remote: desc, Dst: got}}); err != nil {
		t.Fatalf("one-sided READ of a frozen node: %v", err)
	}
	if !bytes.Equal(got, n.Srv.Region().Bytes()[:len(got)]) {
		t.Fatal("one-sided READ of a frozen node returned other bytes than its region holds")
	}
	rpcs := oneSided.Stats().RPCGets
	if v, err := oneSided.Get(ctxWithin(t, time.Second), []byte("k")); err != nil || string(v) != "v1" {
		t.Fatalf("one-sided GET of a frozen node: %q, %v", v, err)
	}
	if oneSided.Stats().RPCGets != rpcs {
		t.Fatal("a serializable GET of a frozen node went to RPC")
	}

	// RPCs wait: a short one times out, a long one is answered after the thaw.
	if v, err := rpc.Get(ctxWithin(t, 300*time.Millisecond), []byte("k")); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("RPC GET during the freeze: %q, %v; want ErrUnavailable", v, err)
	}
	if err := writer.Put(ctxWithin(t, 300*time.Millisecond), []byte("other"), []byte("x")); err == nil {
		t.Fatal("PUT during the freeze succeeded")
	}
	// Even RPCs that need neither the Raft loop nor the table wait: a
	// member list, a new client's hello.
	if ms, err := writer.Members(ctxWithin(t, 300*time.Millisecond)); err == nil {
		t.Fatalf("member list answered during the freeze: %+v", ms)
	}
	late := newClient(t, eps, client.Serializable)
	if v, err := late.Get(ctxWithin(t, 300*time.Millisecond), []byte("k")); err == nil {
		t.Fatalf("a client connected to a frozen node (hello answered) and read %q", v)
	}
	if _, err := writer.Members(ctxWithin(t, 10*time.Second)); err != nil {
		t.Fatalf("member list across the thaw: %v", err)
	}
	if now := time.Now(); now.Before(thaw) {
		t.Fatalf("an RPC was answered %v before the thaw", thaw.Sub(now))
	}

	// Thawed: writes and reads work again.
	if err := writer.Put(ctxWithin(t, 10*time.Second), []byte("k"), []byte("v2")); err != nil {
		t.Fatalf("PUT after the thaw: %v", err)
	}
	if v, err := rpc.Get(ctxWithin(t, 10*time.Second), []byte("k")); err != nil || string(v) != "v2" {
		t.Fatalf("RPC GET after the thaw: %q, %v", v, err)
	}

	// Close ends a freeze at once.
	if err := n.Srv.Freeze(time.Minute); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { n.Stop(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close of a frozen server did not return")
	}
}

func ctxWithin(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
