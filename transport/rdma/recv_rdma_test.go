//go:build rdma

package rdma

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// A Recv that gives up in the middle of a fragmented message loses
// nothing, and nothing of the message lands in the caller's buffer (which
// the caller may reuse): the next Recv returns the whole message.
func TestRecvResumesMessage(t *testing.T) {
	cfg := Config{BufSize: 1024}
	c, s, _, _ := pair(t, cfg)
	cc := c.(*conn)
	frag := cc.fragSize
	msg := pattern(3*frag, 11)
	h := header{kind: msgData}
	fragment := func(i int, flags uint8) {
		var bufs [1]uint16
		if _, _, err := cc.takeSendBuffers(ctxT(t), 1, bufs[:]); err != nil {
			t.Fatal(err)
		}
		cc.memMu.RLock()
		b := cc.sendBuf(int(bufs[0]))
		h.flags = flags
		h.put(b)
		copy(b[headerSize:], msg[i*frag:(i+1)*frag])
		var sd [1]sendWR
		setSend(&sd[0], cc.base+uint64(cc.sendAt+int(bufs[0])*cc.cfg.BufSize), headerSize+frag, wrID(cc.id, kindSend, 0, int(bufs[0])))
		err := cc.postSends(sd[:], bufs[:])
		cc.memMu.RUnlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	h.total = uint32(len(msg))
	fragment(0, flagFirst)
	h.total = 0
	buf := make([]byte, 0, 2*len(msg))
	short, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Recv(short, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv with the message incomplete = %v; want DeadlineExceeded", err)
	}
	for i := range buf[:cap(buf)] {
		buf[:cap(buf)][i] = 0xee // the caller reuses its buffer
	}
	fragment(1, 0)
	fragment(2, flagLast)
	got, err := s.Recv(ctxT(t), nil)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("the resumed Recv: %d bytes, %v; want the %d-byte message intact", len(got), err, len(msg))
	}
}

// A peer that sends more messages than its message credits allow, each in
// a receive buffer it had credit for, breaks the protocol: the connection
// closes.
func TestPeerExceedsMessageCredits(t *testing.T) {
	cfg := Config{Credits: 4} // 5 receive buffers
	c, s, _, _ := pair(t, cfg)
	for range cfg.Credits + 1 {
		rawSend(t, c.(*conn), header{kind: msgData, flags: flagFirst | flagLast}, 0)
	}
	ctx := ctxT(t)
	select { // no Recv until then, so all five are queued at once
	case <-s.(*conn).closed:
	case <-ctx.Done():
		t.Fatal("the receiver took more messages than its credits allow and stayed open")
	}
	var err error
	for range cfg.Credits + 1 {
		if _, err = s.Recv(ctx, nil); err != nil {
			break
		}
	}
	if !errors.Is(err, transport.ErrProtocol) || !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("receiver's Recv = %v; want ErrProtocol and ErrClosed (message credits exceeded)", err)
	}
}
