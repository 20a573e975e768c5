package server

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestWatchConnIdleMemory: clients that watch a key, receive one event of a
// large value and cancel their watch, then sit idle, must cost the server
// what an idle client connection costs (DefaultMaxConnections: "about 30
// KiB of heap"; maxIdleHeap here). The connection's watch goroutine kept
// the scratch it built the 1 MiB message in (watchConn.val) for the life of
// the connection, though it lets its frame scratch go above keepRecvBuf.
func TestWatchConnIdleMemory(t *testing.T) {
	const n = 20
	s := floodServer(t, Config{}, tcp.Config{})
	watch := rawRequest(&wire.Request{Op: wire.OpWatch, ID: 1, Key: []byte("k"), Value: wire.AppendWatchRequest(nil, 0)})
	cancel := rawRequest(&wire.Request{Op: wire.OpWatchCancel, ID: 2, Value: wire.AppendWatchCancel(nil, 1)})
	nextMsg := func(nc net.Conn) {
		for typ, _ := readRawFrame(t, nc); typ != 1; typ, _ = readRawFrame(t, nc) {
		}
	}
	var conns []net.Conn
	for range n {
		nc := dialRaw(t, s.Addr(), 64)
		if _, err := nc.Write(watch); err != nil {
			t.Fatal(err)
		}
		nextMsg(nc) // created
		conns = append(conns, nc)
	}
	value := bytes.Repeat([]byte("v"), table.MaxValue)
	put := func(key string) {
		if resp := s.put(context.Background(), []byte(key), value); resp.Status != wire.StatusOK {
			t.Fatalf("put: %+v", resp)
		}
	}
	// What one such PUT costs the node whoever watches (its history entry,
	// its log entry, Pebble's memtable): a PUT of a key no one watches.
	base0 := heapNow()
	put("other")
	time.Sleep(100 * time.Millisecond)
	base := heapNow()
	put("k")
	for _, nc := range conns {
		nextMsg(nc) // the event
		if _, err := nc.Write(cancel); err != nil {
			t.Fatal(err)
		}
		nextMsg(nc) // cancelled
	}
	time.Sleep(100 * time.Millisecond)
	per := float64((heapNow()-base)-(base-base0)) / n
	t.Logf("per client idle after one %d KiB watch event: server heap %.1f KiB (a PUT's own cost, %d KiB, left out)",
		table.MaxValue>>10, per/1024, (base-base0)>>10)
	if per > maxIdleHeap {
		t.Errorf("an idle client connection whose cancelled watch once got a %d KiB event costs the server %.1f KiB of heap; want at most %d KiB",
			table.MaxValue>>10, per/1024, maxIdleHeap>>10)
	}
}
