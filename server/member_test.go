package server

import (
	"context"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestMemberAddChecksTheAddress: an address no transport could dial is
// refused, for a learner, a voter or an update, before it enters the log, where every node would keep it (and
// a comma in it would corrupt the member lists nodes print and parse).
func TestMemberAddChecksTheAddress(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	ctx := context.Background()
	for _, op := range []wire.Op{wire.OpMemberAdd, wire.OpMemberAddVoter, wire.OpMemberUpdate} {
		for _, addr := range []string{"", "node9", "127.0.0.1:0", "h:1,2=h:2", "h :1"} {
			req := wire.Request{Op: op, Key: []byte("9"), Value: []byte(addr)}
			if resp := s.handle(ctx, &req); resp.Status != wire.StatusBadRequest {
				t.Errorf("%s 9 %q: status %d %q, want bad request", op, addr, resp.Status, resp.Value)
			}
		}
	}
	if ms := s.members(); len(ms) != 1 {
		t.Fatalf("members after refused adds: %+v", ms)
	}
	req := wire.Request{Op: wire.OpMemberAdd, Key: []byte("9"), Value: []byte("127.0.0.1:9")}
	if resp := s.handle(ctx, &req); resp.Status != wire.StatusOK {
		t.Fatalf("member add 9 127.0.0.1:9: status %d %q", resp.Status, resp.Value)
	}
}

// TestMemberAddRefusesAnAddressInUse: a member at another member's address
// would never get what is sent to it (that process drops it as
// wrong_recipient), so its promotion would hang; refused, as etcd does.
func TestMemberAddRefusesAnAddressInUse(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	ctx := context.Background()
	add := func(id, addr string) wire.Response {
		req := wire.Request{Op: wire.OpMemberAdd, Key: []byte(id), Value: []byte(addr)}
		return s.handle(ctx, &req)
	}
	if resp := add("9", "127.0.0.1:9"); resp.Status != wire.StatusOK {
		t.Fatalf("member add 9: status %d %q", resp.Status, resp.Value)
	}
	for _, addr := range []string{"127.0.0.1:9", "[::ffff:127.0.0.1]:9"} { // the same address, spelled otherwise
		if resp := add("10", addr); resp.Status != wire.StatusBadRequest || !strings.Contains(string(resp.Value), "in use") {
			t.Errorf("member add 10 at %s, another member's: status %d %q, want bad request; members now %+v",
				addr, resp.Status, resp.Value, s.members())
		}
	}
	// Once 9 is gone its address is free (a node replaced in place).
	rm := wire.Request{Op: wire.OpMemberRemove, Key: []byte("9")}
	if resp := s.handle(ctx, &rm); resp.Status != wire.StatusOK {
		t.Fatalf("member remove 9: status %d %q", resp.Status, resp.Value)
	}
	if resp := add("10", "127.0.0.1:9"); resp.Status != wire.StatusOK {
		t.Fatalf("member add 10 at removed member 9's address: status %d %q", resp.Status, resp.Value)
	}
	// Its id is not: ids are never reused (as in etcd).
	if resp := add("9", "127.0.0.1:11"); resp.Status != wire.StatusBadRequest || !strings.Contains(string(resp.Value), "removed") {
		t.Errorf("member add of removed id 9: status %d %q, want bad request", resp.Status, resp.Value)
	}
}

// TestMemberPromoteRefusals: promoting a voter, or a learner whose node
// never ran, is refused as a bad request saying why, as etcd refuses
// them, instead of succeeding silently or waiting out the client's
// deadline.
func TestMemberPromoteRefusals(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	ctx := context.Background()
	promote := func(id string) wire.Response {
		req := wire.Request{Op: wire.OpMemberPromote, Key: []byte(id)}
		return s.handle(ctx, &req)
	}
	if resp := promote("1"); resp.Status != wire.StatusBadRequest || !strings.Contains(string(resp.Value), "member 1 is already a voter") {
		t.Errorf("member promote of voter 1: status %d %q, want bad request", resp.Status, resp.Value)
	}
	add := wire.Request{Op: wire.OpMemberAdd, Key: []byte("9"), Value: []byte("127.0.0.1:9")}
	if resp := s.handle(ctx, &add); resp.Status != wire.StatusOK {
		t.Fatalf("member add 9: status %d %q", resp.Status, resp.Value)
	}
	if resp := promote("9"); resp.Status != wire.StatusBadRequest || !strings.Contains(string(resp.Value), "learner 9 has not been heard from") {
		t.Errorf("member promote of learner 9, never started: status %d %q, want bad request", resp.Status, resp.Value)
	}
}
