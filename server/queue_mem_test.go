package server

import (
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestStalledClientQueueBounded: a client that never reads its replies
// fills its connection's budget (maxConnBytes) with GETs, so serveConn
// stops calling Recv, and then sends large requests on the message credits
// it still holds. The transport queues at most its byte window of them
// (tcp.DefaultQueueBytes; a client that sends more is closed), not
// Credits x MaxMessage (at the defaults, up to 256 MiB of one
// connection).
func TestStalledClientQueueBounded(t *testing.T) {
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
