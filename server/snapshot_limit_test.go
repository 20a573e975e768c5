package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestSnapshotSmallMaxMessage: a client whose transport accepts only tiny
// messages asks for a backup. A chunk's data limit, taken from the
// connection's max message, went negative (a panic that took the node
// down) or to zero (empty chunks for ever, holding the node's only
// snapshot slot). It is refused with StatusBadRequest (when even that
// fits the connection), and the node then streams a backup to a client
// that can take one.
func TestSnapshotSmallMaxMessage(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	if resp := s.put(context.Background(), []byte("k"), []byte("v")); resp.Status != wire.StatusOK {
		t.Fatalf("put: %+v", resp)
	}
	small := []int{wire.RequestHeaderLen, wire.ResponseHeaderLen + 1, 1000,
		minSnapshotChunk + wire.ResponseHeaderLen} // one byte short
	for _, max := range append(small, minSnapshotChunk+wire.ResponseHeaderLen+1) {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			ctx, conn := rawClient(t, s, tcp.Config{MaxMessage: max})
			refusals := s.metrics.requests.WithLabelValues(wire.OpSnapshot.String(), statusName(wire.StatusBadRequest))
			before := testutil.ToFloat64(refusals)
			if err := conn.Send(ctx, wire.AppendRequest(nil, &wire.Request{Op: wire.OpSnapshot, ID: 1})); err != nil {
				t.Fatal(err)
			}
			refused := max < minSnapshotChunk+wire.ResponseHeaderLen+1
			if refused && max < 200 {
				// Too small for the refusal too: the server drops it. The
				// slot must be free again, and the node up.
				waitUntil(t, "the refusal", func() bool { return testutil.ToFloat64(refusals) > before })
				return
			}
			chunks := 0
			for {
				b, err := conn.Recv(ctx, nil)
				if err != nil {
					t.Fatalf("recv after %d chunks: %v", chunks, err)
				}
				var resp wire.Response
				if err := wire.DecodeResponse(b, &resp); err != nil {
					t.Fatal(err)
				}
				if refused {
					if resp.Status != wire.StatusBadRequest {
						t.Fatalf("max message %d: status %v %q, want a bad request", max, resp.Status, resp.Value)
					}
					return
				}
				if resp.Status != wire.StatusOK {
					t.Fatalf("max message %d: status %v %q after %d chunks", max, resp.Status, resp.Value, chunks)
				}
				last, data, err := wire.DecodeSnapshotChunk(resp.Value)
				if err != nil {
					t.Fatal(err)
				}
				if chunks++; len(data) == 0 && !last {
					t.Fatalf("chunk %d carries no data", chunks)
				}
				if last {
					return
				}
			}
		})
	}
	// Counted once the last chunk is sent: the client may have it first.
	waitUntil(t, "the one backup with room for chunks counted", func() bool { return SnapshotStreams(s, snapSent) == 1 })
	if n := SnapshotStreams(s, snapFailed); n != 0 {
		t.Fatalf("%v backup streams failed", n)
	}
}
