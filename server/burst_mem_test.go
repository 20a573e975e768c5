package server

import (
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

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
