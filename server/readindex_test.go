package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// askNode sends one GET RPC with the given consistency flags straight to
// addr, on a connection of its own (so no earlier request's late answer can
// be taken for it), and waits up to wait for the answer. It bypasses the
// client, which would move on to other nodes: the test needs what this one
// node answers. err is non-nil if no answer came.
func askNode(t *testing.T, addr string, key []byte, flags uint16, wait time.Duration) (wire.Response, error) {
	t.Helper()
	return askRequest(t, addr, &wire.Request{Op: wire.OpGet, Flags: flags, Key: key}, wait)
}

// askRequest sends req (its ID set to 1) to addr as askNode does, and
// returns the answer.
func askRequest(t *testing.T, addr string, req *wire.Request, wait time.Duration) (wire.Response, error) {
	t.Helper()
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, err := tr.Dial(ctx, addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	r := *req
	r.ID = 1
	if err := conn.Send(ctx, wire.AppendRequest(nil, &r)); err != nil {
		t.Fatalf("send to %s: %v", addr, err)
	}
	buf, err := conn.Recv(ctx, nil)
	if err != nil {
		return wire.Response{}, err
	}
	var resp wire.Response
	if err := wire.DecodeResponse(buf, &resp); err != nil || resp.ID != 1 {
		t.Fatalf("bad answer from %s: %+v, %v", addr, resp, err)
	}
	return resp, nil
}

// othersThan is nodes without n.
func othersThan(nodes []*kvdtest.Node, n *kvdtest.Node) []*kvdtest.Node {
	var rest []*kvdtest.Node
	for _, m := range nodes {
		if m != n {
			rest = append(rest, m)
		}
	}
	return rest
}

// TestDeposedLeaderRPCReadsNeedReadIndex: a leader cut off from both
// followers is deposed; the other two elect a new leader, which overwrites
// k. The deposed leader still holds the old value (a serializable read
// shows it), so a linearizable or readindex RPC GET it answered without
// confirming its leadership with a quorum (ReadIndex) would return a value
// that an acknowledged write has replaced. It must fail or not answer.
func TestDeposedLeaderRPCReadsNeedReadIndex(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	old := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	rest := othersThan(nodes, old)
	ctx := context.Background()
	key := []byte("k")
	if err := newClient(t, []string{old.Addr}, client.Linearizable).Put(ctx, key, []byte("v1")); err != nil {
		t.Fatal(err)
	}

	old.Isolate(rest...)
	t.Cleanup(func() { old.Rejoin(rest...) })
	leader := kvdtest.WaitLeader(t, rest, 20*time.Second)
	c := newClient(t, []string{leader.Addr}, client.Linearizable)
	if err := c.Put(ctx, key, []byte("v2")); err != nil {
		t.Fatalf("put v2 through the new leader %d: %v", leader.ID, err)
	}
	if v, err := c.Get(ctx, key, client.WithConsistency(client.ReadIndex)); err != nil || string(v) != "v2" {
		t.Fatalf("new leader %d: readindex get = %q, %v; want v2", leader.ID, v, err)
	}

	// The deposed leader's state still has v1: the partition held.
	resp, err := askNode(t, old.Addr, key, wire.Serializable, 5*time.Second)
	if err != nil || resp.Status != wire.StatusOK || string(resp.Value) != "v1" {
		t.Fatalf("deposed leader %d: serializable get = %+v, %v; want v1 (is the partition in place?)", old.ID, resp, err)
	}
	for _, tc := range []struct {
		name  string
		flags uint16
	}{{"linearizable", wire.Linearizable}, {"readindex", wire.ReadIndex}} {
		resp, err := askNode(t, old.Addr, key, tc.flags, 2*time.Second)
		switch {
		case err != nil && errors.Is(err, context.DeadlineExceeded):
			// No answer: it cannot confirm its leadership. Correct.
		case err != nil:
			t.Errorf("deposed leader %d: %s get: %v", old.ID, tc.name, err)
		case resp.Status == wire.StatusOK:
			t.Errorf("deposed leader %d answered a %s RPC GET with %q (version %d) after the new leader %d wrote v2: "+
				"it served its own state without confirming its leadership (ReadIndex)",
				old.ID, tc.name, resp.Value, resp.Version, leader.ID)
		default:
			t.Logf("deposed leader %d: %s get refused with status %d (%s)", old.ID, tc.name, resp.Status, resp.Value)
		}
	}
}
