package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// What the server refuses of a client, and how: replies and watch
// messages larger than the client's transport takes, backups to a client
// taking only tiny messages, flags on PUT and DELETE, and bad member ids.

// TestReplyBeyondClientsMaxMessage: a reply larger than the client's
// transport takes (the MaxMessage the client chose) is answered with a bad
// request saying so; if even that does not fit, the connection is closed
// and counted: a reply silently dropped would leave the client waiting
// out its own timeout.
func TestReplyBeyondClientsMaxMessage(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	if resp := s.put(context.Background(), []byte("k"), bytes.Repeat([]byte("v"), 1000)); resp.Status != wire.StatusOK {
		t.Fatalf("put: %+v", resp)
	}
	get := wire.AppendRequest(nil, &wire.Request{Op: wire.OpGet, ID: 7, Key: []byte("k"), Flags: wire.Serializable})

	ctx, conn := rawClient(t, s, tcp.Config{MaxMessage: 512})
	if err := conn.Send(ctx, get); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a served GET takes milliseconds
	defer cancel()
	b, err := conn.Recv(rctx, nil)
	if err != nil {
		t.Fatalf("a GET whose value exceeds the client's max message: %v, want a reply", err)
	}
	var resp wire.Response
	if err := wire.DecodeResponse(b, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Status != wire.StatusBadRequest || resp.ID != 7 || !strings.Contains(string(resp.Value), "exceeds this connection's max message of 512") {
		t.Fatalf("reply: status %d, id %d, %q; want a bad request naming the limit", resp.Status, resp.ID, resp.Value)
	}

	before := refusedCount(s, transport.ReasonTooLarge)
	ctx, conn = rawClient(t, s, tcp.Config{MaxMessage: 27}) // not even the error fits
	if err := conn.Send(ctx, get); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Recv(rctx, nil); err == nil || rctx.Err() != nil {
		t.Fatalf("Recv: %v, want the connection closed", err)
	}
	wait.For(t, "the refusal counted", func() bool { return refusedCount(s, transport.ReasonTooLarge) == before+1 })
}

// TestWatchMessageBeyondMaxMessageCounted: a connection closed because a
// watch message exceeds what its client takes is counted as a refusal
// like every other refusal, so that the operator sees it in the metrics.
func TestWatchMessageBeyondMaxMessageCounted(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	before := refusedCount(s, transport.ReasonTooLarge)
	for i := range 3 {
		ctx, conn := rawClient(t, s, tcp.Config{MaxMessage: 27})
		openWatch(t, ctx, conn, "k")
		for {
			if _, err := conn.Recv(ctx, nil); err != nil {
				if ctx.Err() != nil {
					t.Fatal("connection left open")
				}
				break
			}
		}
		wait.For(t, "the refusal counted", func() bool { return refusedCount(s, transport.ReasonTooLarge) == before+i+1 })
	}
}

// TestPutDeleteRefuseFlags: PUT and DELETE take no flags; one that carries
// some is refused, not applied as if it had none: a flag a later client
// sets (a condition, say) must not be silently ignored.
func TestPutDeleteRefuseFlags(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	ctx := context.Background()
	for _, op := range []wire.Op{wire.OpPut, wire.OpDelete} {
		req := &wire.Request{Op: op, Flags: 0x80, Key: []byte("k")}
		if op == wire.OpPut {
			req.Value = []byte("v")
		}
		if resp := s.handle(ctx, req); resp.Status != wire.StatusBadRequest || !strings.Contains(string(resp.Value), "flags") {
			t.Errorf("%v with flags %#x: status %d %q, want a bad request", op, req.Flags, resp.Status, resp.Value)
		}
	}
	if _, _, ok, _ := s.kv.Get([]byte("k")); ok {
		t.Fatal("a PUT with flags was applied")
	}
}

// TestMemberIDQuotedShort: a bad member id is quoted back cut short, not
// whole: quoted, a 64 KiB id of 0xff bytes would make a 256 KiB reply
// against about 68 KiB reserved.
func TestMemberIDQuotedShort(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	key := bytes.Repeat([]byte{0xff}, 65535)
	resp := s.handle(context.Background(), &wire.Request{Op: wire.OpMemberRemove, Key: key})
	if resp.Status != wire.StatusBadRequest || len(resp.Value) > 512 || !strings.Contains(string(resp.Value), "65535 bytes") {
		t.Fatalf("member remove with a %d-byte id: status %d, reply of %d bytes", len(key), resp.Status, len(resp.Value))
	}
}

// TestSnapshotSmallMaxMessage: a client whose transport accepts only tiny
// messages asks for a backup. A chunk's data limit, taken from the
// connection's max message, must not go negative (a panic that would take
// the node down) or to zero (empty chunks for ever, holding the node's
// only snapshot slot). It is refused with StatusBadRequest (when even that
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
				wait.For(t, "the refusal", func() bool { return testutil.ToFloat64(refusals) > before })
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
	wait.For(t, "the one backup with room for chunks counted", func() bool { return SnapshotStreams(s, snapSent) == 1 })
	if n := SnapshotStreams(s, snapFailed); n != 0 {
		t.Fatalf("%v backup streams failed", n)
	}
}
