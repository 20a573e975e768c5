package client

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// snapshotServer answers every connection's OpSnapshot with the responses
// script makes, and returns its address.
func snapshotServer(t *testing.T, script func() []wire.Response) string {
	t.Helper()
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); ln.Close(); tr.Close() })
	go func() {
		for {
			conn, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				b, err := conn.Recv(ctx, nil)
				var req wire.Request
				if err != nil || wire.DecodeRequest(b, &req) != nil || req.Op != wire.OpSnapshot {
					return
				}
				for _, r := range script() {
					r.Op, r.ID = wire.OpSnapshot, req.ID
					if conn.Send(ctx, wire.AppendResponse(nil, &r)) != nil {
						return
					}
				}
				conn.Recv(ctx, nil) // until the client hangs up
			}()
		}
	}()
	return ln.Addr()
}

func testBackup(t *testing.T) []byte {
	var b bytes.Buffer
	w, err := backup.NewWriter(&b, backup.Header{Index: 9, Keys: 2, Cluster: 5, Revision: 9})
	if err != nil {
		t.Fatal(err)
	}
	w.Add([]byte("a"), []byte("1"), revision.Meta{Create: 4, Mod: 4, Version: 1})
	w.Add([]byte("b"), []byte("2"), revision.Meta{Create: 9, Mod: 9, Version: 1})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// chunks splits file into n chunk responses, the last one marked.
func chunks(file []byte, n int, last bool) []wire.Response {
	var out []wire.Response
	step := (len(file) + n - 1) / n
	for i := 0; i < len(file); i += step {
		end := min(i+step, len(file))
		out = append(out, wire.Response{Version: 9, Value: wire.AppendSnapshotChunk(nil, last && end == len(file), file[i:end])})
	}
	return out
}

func snapshotClient(t *testing.T, eps ...string) *Client {
	t.Helper()
	c, err := New(Config{Endpoints: eps, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSnapshotStream(t *testing.T) {
	file := testBackup(t)
	ctx := context.Background()

	good := snapshotServer(t, func() []wire.Response { return chunks(file, 3, true) })
	var out bytes.Buffer
	info, err := snapshotClient(t, good).Snapshot(ctx, &out)
	if err != nil || !bytes.Equal(out.Bytes(), file) || info.Index != 9 || info.Keys != 2 || info.Bytes != int64(len(file)) || info.Node != good {
		t.Fatalf("good stream: %+v, %v; %d bytes of %d", info, err, out.Len(), len(file))
	}

	// A follower names the leader: the client goes there.
	follower := snapshotServer(t, func() []wire.Response {
		return []wire.Response{{Status: wire.StatusNotLeader, Version: 2, Value: []byte(good)}}
	})
	if _, err := snapshotClient(t, follower).Snapshot(ctx, &bytes.Buffer{}); err != nil {
		t.Fatalf("via a follower: %v", err)
	}

	for name, script := range map[string][]wire.Response{
		"file cut short":      chunks(file[:len(file)-5], 2, true),
		"error mid-stream":    append(chunks(file, 3, false)[:2], wire.Response{Status: wire.StatusUnavailable, Value: []byte("lost leadership")}),
		"damaged":             chunks(append(bytes.Clone(file[:20]), append([]byte{file[20] ^ 1}, file[21:]...)...), 2, true),
		"bytes after the end": chunks(append(bytes.Clone(file), 0), 2, true),
	} {
		addr := snapshotServer(t, func() []wire.Response { return script })
		// good is listed second: a broken stream must not move on to it.
		_, err := snapshotClient(t, addr, good).Snapshot(ctx, &bytes.Buffer{})
		if !errors.Is(err, ErrSnapshotStream) {
			t.Errorf("%s: %v, want ErrSnapshotStream", name, err)
		}
	}

	busy := snapshotServer(t, func() []wire.Response {
		return []wire.Response{{Status: wire.StatusRetry, Value: []byte("busy")}}
	})
	if _, err := snapshotClient(t, busy).Snapshot(ctx, &bytes.Buffer{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("busy node: %v, want ErrUnavailable", err)
	}
	if _, err := snapshotClient(t, busy, good).Snapshot(ctx, &bytes.Buffer{}); err != nil {
		t.Errorf("busy node, then a good one: %v", err)
	}
}
