package tcp

import (
	"testing"

	"github.com/kvd-project/kvd/transport"
)

// TestIdleConnMemoryAfterBurst: a peer that sends one window of 64 KiB
// messages (Credits of them, each consumed by Recv) and then goes idle must
// cost the listener's side what an idle connection costs (doc.go: "Memory
// per idle connection: ... about 27 KiB of heap"; maxIdleHeap here), not
// Credits x keepMsgBuf kept in the message queue's buffers.
func TestIdleConnMemoryAfterBurst(t *testing.T) {
	const n = 20
	_, ln := listen(t, Config{})
	ctx := testCtx(t)
	h := okHello()
	h.maxMessage = transport.DefaultMaxMessage
	msg := make([]byte, keepMsgBuf)
	burst := make([]byte, 0, transport.DefaultCredits*(headerSize+len(msg)))
	for range transport.DefaultCredits {
		burst = append(burst, frame(header{typ: frameMsg, length: uint64(len(msg))}, msg)...)
	}
	base := heapNow()
	var buf []byte // reused across messages, as a server's serveConn does
	for range n {
		nc, _ := dialRaw(t, ln.Addr(), h)
		c, err := ln.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		go nc.Write(burst)
		for range transport.DefaultCredits {
			if buf, err = c.Recv(ctx, buf[:0]); err != nil {
				t.Fatal(err)
			}
		}
	}
	buf = nil
	per := float64(int64(heapNow())-int64(base)) / n
	t.Logf("per connection idle after one window of %d KiB messages: heap %.1f KiB", keepMsgBuf>>10, per/1024)
	if per > maxIdleHeap {
		t.Errorf("an idle connection that once received %d messages of %d KiB keeps %.1f KiB of heap; want at most %d KiB",
			transport.DefaultCredits, keepMsgBuf>>10, per/1024, maxIdleHeap>>10)
	}
}

func TestMsgClass(t *testing.T) {
	for _, tc := range []struct{ n, size int }{
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {4096, 4096}, {4097, 8192}, {keepMsgBuf, keepMsgBuf},
	} {
		if got := minMsgBuf << msgClass(tc.n); got != tc.size {
			t.Errorf("a %d-byte message takes a %d-byte buffer, want %d", tc.n, got, tc.size)
		}
		p := getMsgBuf(tc.n)
		if len(*p) != tc.n || cap(*p) != tc.size {
			t.Errorf("getMsgBuf(%d): len %d cap %d, want cap %d", tc.n, len(*p), cap(*p), tc.size)
		}
		putMsgBuf(p)
	}
}
