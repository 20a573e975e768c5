package server

import (
	"context"
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestMemberAddChecksTheAddress: an address no transport could dial is
// refused before it enters the log, where every node would keep it (and
// a comma in it would corrupt the member lists nodes print and parse).
func TestMemberAddChecksTheAddress(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	ctx := context.Background()
	for _, addr := range []string{"", "node9", "127.0.0.1:0", "h:1,2=h:2", "h :1"} {
		req := wire.Request{Op: wire.OpMemberAdd, Key: []byte("9"), Value: []byte(addr)}
		if resp := s.handle(ctx, &req); resp.Status != wire.StatusBadRequest {
			t.Errorf("member add 9 %q: status %d %q, want bad request", addr, resp.Status, resp.Value)
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
