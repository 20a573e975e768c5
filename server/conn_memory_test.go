package server

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// What a client connection costs the server's heap: bounded by its budget
// and byte window while it stalls, and back to an idle connection's cost
// after a burst of requests or a large watch event.

// TestStalledClientQueueBounded: a client that never reads its replies
// fills its connection's budget (maxConnBytes) with GETs, so serveConn
// stops calling Recv, and then sends large requests on the message credits
// it still holds. The transport queues at most its byte window of them
// (tcp.DefaultQueueBytes; a client that sends more is closed), not
// Credits x MaxMessage (at the defaults, up to 256 MiB of one
// connection).
func TestStalledClientQueueBounded(t *testing.T) {
	skipShort(t)
	s := floodServer(t, Config{}, tcp.Config{})
	const gets = 20                             // more than the budget admits (15-16)
	const big = transport.DefaultCredits - gets // never more unconsumed MSGs than credits
	base := heapNow()
	nc := neverReading(t, s.Addr(), 1, []byte("k"), gets)
	payload := make([]byte, transport.DefaultMaxMessage)
	for range big {
		if _, err := nc.Write(rawMsg(payload, len(payload))); err != nil {
			break // closed for breaking the window
		}
	}
	bound := int64(maxConnBytes + tcp.DefaultQueueBytes + 4<<20)
	worst := int64(0)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		worst = max(worst, heapNow()-base)
	}
	t.Logf("one never-reading client sending large requests: server heap +%d MiB at most", worst>>20)
	if worst > bound {
		t.Errorf("one client connection held %d MiB of the server's heap, beyond maxConnBytes (%d MiB) + the byte window (%d MiB) + 4 MiB",
			worst>>20, maxConnBytes>>20, tcp.DefaultQueueBytes>>20)
	}
}

// TestFloodIdleAfterBurst: clients that send one window (64) of 64 KiB
// requests, read the replies and then sit idle must cost the server what an
// idle client connection costs (DefaultMaxConnections: "about 30 KiB of
// heap"; maxIdleHeap here). The transport kept every 64 KiB message buffer
// of the window for the life of the connection: about 4 MiB each, so
// --max-connections such clients pin about 40 GiB.
func TestFloodIdleAfterBurst(t *testing.T) {
	const n = 20
	s := floodServer(t, Config{}, tcp.Config{})
	value := make([]byte, 64<<10-wire.RequestHeaderLen) // a 64 KiB message
	var burst []byte
	for i := range 64 {
		burst = append(burst, rawRequest(&wire.Request{Op: wire.OpClock, ID: uint64(i + 1), Value: value})...)
	}
	base := heapNow()
	for range n {
		nc := helloed(t, s.Addr())
		credit := make([]byte, 16) // gives back the hello reply's credit
		credit[0], credit[4] = 2, 1
		if _, err := nc.Write(append(credit, burst...)); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 64; {
			if typ, _ := readRawFrame(t, nc); typ == 1 {
				got++
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	per := float64(heapNow()-base) / n
	t.Logf("per client idle after 64 requests of 64 KiB: server heap %.1f KiB", per/1024)
	if per > maxIdleHeap {
		t.Errorf("an idle client connection that once sent 64 requests of 64 KiB costs the server %.1f KiB of heap; want at most %d KiB",
			per/1024, maxIdleHeap>>10)
	}
}

// TestWatchConnIdleMemory: clients that watch a key, receive one event of a
// large value and cancel their watch, then sit idle, must cost the server
// what an idle client connection costs (DefaultMaxConnections: "about 30
// KiB of heap"; maxIdleHeap here). The connection's watch goroutine kept
// the scratch it built the 1 MiB message in (watchConn.val) for the life of
// the connection, though it lets its frame scratch go above keepRecvBuf.
func TestWatchConnIdleMemory(t *testing.T) {
	skipShort(t)
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
