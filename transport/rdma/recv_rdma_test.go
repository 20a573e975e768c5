//go:build rdma

package rdma

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
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

// Every message that arrived before the peer closed is returned, in order,
// even while Recv runs concurrently with the teardown that the peer's
// disconnect starts (teardown moves queued messages out of the receive
// buffers it is about to free; a Recv that had just taken one must not lose
// it). The window is narrow, so the close is repeated with a receiver
// draining the queue as the disconnect lands; small and fragmented
// messages both, since they take different routes to Recv.
func TestRecvRacesPeerClose(t *testing.T) {
	cfg := Config{Credits: 32, BufSize: 512}
	for round := range 40 {
		c, s, _, _ := pair(t, cfg)
		ctx := ctxT(t)
		msgs := make([][]byte, cfg.Credits)
		for i := range msgs {
			n := 1 + i%7
			if i%5 == 4 {
				n = 3*cfg.BufSize + i // fragmented
			}
			msgs[i] = pattern(n, i)
			if err := s.Send(ctx, msgs[i]); err != nil {
				t.Fatalf("round %d: Send %d: %v", round, i, err)
			}
		}
		got := make(chan error, 1)
		go func() {
			for i := range msgs {
				m, err := c.Recv(ctx, nil)
				if err != nil || !bytes.Equal(m, msgs[i]) {
					got <- fmt.Errorf("Recv %d of %d: %d bytes, %v; want message %d (%d bytes)", i, len(msgs), len(m), err, i, len(msgs[i]))
					return
				}
			}
			_, err := c.Recv(ctx, nil)
			if !errors.Is(err, transport.ErrClosed) {
				got <- fmt.Errorf("Recv after the last message = %v; want ErrClosed", err)
				return
			}
			got <- nil
		}()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		_ = c.Close()
	}
}

// The narrowest case of the race above, forced: the peer's close and the
// teardown it starts happen while Recv holds a message it has taken off the
// queue and not yet copied out of its receive buffer. The message must still
// be returned whole.
func TestRecvHoldsMessageAcrossTeardown(t *testing.T) {
	c, s, ct, _ := pair(t, Config{})
	ctx := ctxT(t)
	msg := pattern(100, 3)
	if err := s.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	ct.takeHook = func(cc *conn) {
		once.Do(func() {
			go func() { _ = s.Close() }()
			// Teardown either finishes now (it must then have kept the
			// message) or waits for this Recv to copy it.
			select {
			case <-cc.done:
			case <-time.After(500 * time.Millisecond):
			}
		})
	}
	got, err := c.Recv(ctx, nil)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("Recv across the peer's close = %d bytes, %v; want the %d-byte message", len(got), err, len(msg))
	}
	if _, err := c.Recv(ctx, nil); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("the next Recv = %v; want ErrClosed", err)
	}
}
