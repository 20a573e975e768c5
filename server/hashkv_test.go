package server

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestHashKVRequests: OpHashKV takes an 8-byte revision and nothing else,
// hashes the state at it, and is refused (retry later) while another one
// runs on the node.
func TestHashKVRequests(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	ctx := context.Background()
	if resp := s.put(ctx, []byte("k"), []byte("v")); resp.Status != wire.StatusOK {
		t.Fatalf("put: %+v", resp)
	}
	rev := binary.LittleEndian.AppendUint64(nil, 0)
	for _, tc := range []struct {
		name string
		req  wire.Request
		want wire.Status
	}{
		{"latest", wire.Request{Op: wire.OpHashKV, Value: rev}, wire.StatusOK},
		{"short revision", wire.Request{Op: wire.OpHashKV, Value: rev[:7]}, wire.StatusBadRequest},
		{"a key", wire.Request{Op: wire.OpHashKV, Key: []byte("k"), Value: rev}, wire.StatusBadRequest},
		{"flags", wire.Request{Op: wire.OpHashKV, Flags: 1, Value: rev}, wire.StatusBadRequest},
		{"future", wire.Request{Op: wire.OpHashKV, Value: binary.LittleEndian.AppendUint64(nil, 1<<40)}, wire.StatusFutureRevision},
	} {
		resp := s.handle(ctx, &tc.req)
		if resp.Status != tc.want {
			t.Errorf("%s: status %d (%s), want %d", tc.name, resp.Status, resp.Value, tc.want)
			continue
		}
		if tc.want == wire.StatusOK {
			if h, err := wire.DecodeHashKV(resp.Value); err != nil || h.HashRevision == 0 {
				t.Errorf("%s: %+v, %v", tc.name, h, err)
			}
		}
	}
	if !s.hashSlots.tryAcquire() {
		t.Fatal("the hash slot is held after the requests")
	}
	resp := s.handle(ctx, &wire.Request{Op: wire.OpHashKV, Value: rev})
	s.hashSlots.release()
	if resp.Status != wire.StatusRetry {
		t.Fatalf("while another hash runs: status %d (%s), want StatusRetry", resp.Status, resp.Value)
	}
}
