package transporttest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/kvd-project/kvd/transport"
)

// message builds message seq of sender id: an 8-byte tag, then a body that
// depends on both, so torn or misdelivered messages show.
func message(id, seq, size int) []byte {
	size = max(size, 8)
	b := make([]byte, size)
	binary.LittleEndian.PutUint32(b, uint32(id))
	binary.LittleEndian.PutUint32(b[4:], uint32(seq))
	for i := 8; i < size; i++ {
		b[i] = byte(i*13 + id*7 + seq)
	}
	return b
}

// checkMessage returns the tag of a message built by message, or an error
// if its body does not match it.
func checkMessage(b []byte) (id, seq int, err error) {
	if len(b) < 8 {
		return 0, 0, fmt.Errorf("message of %d bytes, too short for a tag", len(b))
	}
	id, seq = int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
	for i := 8; i < len(b); i++ {
		if b[i] != byte(i*13+id*7+seq) {
			return id, seq, fmt.Errorf("message %d/%d: byte %d of %d corrupt", id, seq, i, len(b))
		}
	}
	return id, seq, nil
}

func sizeFor(seq int) int { return seq * 97 % 5000 }

// sendMany sends n messages of sender id and reports the first error.
func sendMany(ctx context.Context, c transport.Conn, id, n int) error {
	for seq := range n {
		if err := c.Send(ctx, message(id, seq, sizeFor(seq))); err != nil {
			return fmt.Errorf("Send %d/%d: %w", id, seq, err)
		}
	}
	return nil
}

// recvMany receives n messages and checks that each sender's arrive intact
// and in order (seqs from 0).
func recvMany(ctx context.Context, c transport.Conn, n int) error {
	next := map[int]int{}
	var buf []byte
	for range n {
		var err error
		buf, err = c.Recv(ctx, buf)
		if err != nil {
			return fmt.Errorf("Recv: %w", err)
		}
		id, seq, err := checkMessage(buf)
		if err != nil {
			return err
		}
		if seq != next[id] {
			return fmt.Errorf("sender %d: got message %d, want %d", id, seq, next[id])
		}
		if want := max(sizeFor(seq), 8); len(buf) != want {
			return fmt.Errorf("message %d/%d: %d bytes, want %d", id, seq, len(buf), want)
		}
		next[id]++
	}
	return nil
}

func testMessagesInOrder(t *testing.T, e *env) {
	ctx := guarded(t)
	c, s := e.connect()
	const n = 150
	for _, dir := range []struct {
		name     string
		from, to transport.Conn
	}{{"client to server", c, s}, {"server to client", s, c}} {
		recv := async(func() error { return recvMany(ctx, dir.to, n) })
		noErr(t, dir.name, sendMany(ctx, dir.from, 1, n))
		noErr(t, dir.name, wait(t, dir.name, recv))
	}
}

func testMessageSizes(t *testing.T, e *env) {
	ctx := guarded(t)
	c, s := e.connect()
	if c.MaxMessage() <= 0 || s.MaxMessage() <= 0 {
		t.Fatalf("MaxMessage: client %d, server %d; want > 0", c.MaxMessage(), s.MaxMessage())
	}
	for _, dir := range []struct {
		name     string
		from, to transport.Conn
	}{{"client to server", c, s}, {"server to client", s, c}} {
		limit := dir.from.MaxMessage()
		for _, size := range []int{0, 1, 8, 4095, 4096, 4097, limit - 1, limit} {
			msg := bytes.Repeat([]byte{byte(size)}, size)
			if size > 0 {
				msg[0], msg[size-1] = 0xA1, 0xB2
			}
			recv := async(func() error {
				got, err := dir.to.Recv(ctx, nil)
				if err == nil && !bytes.Equal(got, msg) {
					err = fmt.Errorf("received %d bytes that differ from the %d sent", len(got), size)
				}
				return err
			})
			noErr(t, fmt.Sprintf("%s: Send(%d bytes)", dir.name, size), dir.from.Send(ctx, msg))
			noErr(t, fmt.Sprintf("%s: Recv(%d bytes)", dir.name, size), wait(t, "Recv", recv))
		}
		err := dir.from.Send(ctx, make([]byte, limit+1))
		wantErr(t, fmt.Sprintf("%s: Send(MaxMessage+1 = %d bytes)", dir.name, limit+1), err, transport.ErrMessageTooLarge)
		// The refused message must not have broken or reached anything.
		noErr(t, dir.name+": Send after refusal", dir.from.Send(ctx, []byte("after")))
		got, err := dir.to.Recv(ctx, nil)
		noErr(t, dir.name+": Recv after refusal", err)
		if string(got) != "after" {
			t.Fatalf("%s: after a refused Send, received %q, want %q", dir.name, got, "after")
		}
	}
}

func testRecvAppendsToBuf(t *testing.T, e *env) {
	ctx := guarded(t)
	c, s := e.connect()
	buf := make([]byte, 3, 64)
	copy(buf, "old")
	tests := []struct {
		name string
		msg  string
		buf  []byte
		same bool // the result must reuse buf's array
	}{
		{"fits", "hello", buf, true},
		{"empty into buf", "", buf, true},
		{"nil buf", "world", nil, false},
		{"grows", string(bytes.Repeat([]byte("x"), 100)), buf, false},
	}
	for _, tt := range tests {
		noErr(t, tt.name+": Send", c.Send(ctx, []byte(tt.msg)))
		got, err := s.Recv(ctx, tt.buf)
		noErr(t, tt.name+": Recv", err)
		if string(got) != tt.msg {
			t.Errorf("%s: Recv = %q, want %q", tt.name, got, tt.msg)
		}
		if tt.same && unsafe.SliceData(got) != unsafe.SliceData(tt.buf) {
			t.Errorf("%s: Recv did not append to buf[:0] although it had room", tt.name)
		}
	}
}

func testConcurrentSendsAndReads(t *testing.T, e *env) {
	ctx := guarded(t)
	c, s := e.connect()
	r := e.region(e.server, 64<<10, 5)
	const senders, readers, n = 4, 4, 60
	var wg sync.WaitGroup
	errs := make(chan error, senders+readers+1)
	for id := range senders {
		wg.Go(func() { errs <- sendMany(ctx, c, id, n) })
	}
	for g := range readers {
		wg.Go(func() { errs <- readMany(ctx, c, r.Descriptor(), 5, g, 40) })
	}
	wg.Go(func() { errs <- recvMany(ctx, s, senders*n) })
	wg.Wait()
	close(errs)
	for err := range errs {
		noErr(t, "concurrent sends and reads", err)
	}
}

func testSeveralConns(t *testing.T, e *env) {
	ctx := guarded(t)
	r := e.region(e.server, 8<<10, 9)
	const conns, n = 3, 20
	var cs, ss [conns]transport.Conn
	for i := range conns {
		cs[i], ss[i] = e.connect()
	}
	// Traffic on one connection must arrive on that one only: each conn
	// carries its own sender id.
	var wg sync.WaitGroup
	errs := make(chan error, 3*conns)
	for i := range conns {
		wg.Go(func() { errs <- sendMany(ctx, cs[i], i, n) })
		wg.Go(func() {
			err := recvMany(ctx, ss[i], n)
			if err == nil {
				err = expectQuiet(ctx, ss[i])
			}
			errs <- err
		})
		wg.Go(func() { errs <- readMany(ctx, cs[i], r.Descriptor(), 9, i, 20) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		noErr(t, "several conns", err)
	}
	// Closing one leaves the others working.
	cs[1].Close()
	for _, i := range []int{0, 2} {
		noErr(t, fmt.Sprintf("conn %d after closing conn 1", i), sendMany(ctx, cs[i], i, 1))
		got, err := ss[i].Recv(ctx, nil)
		noErr(t, "Recv", err)
		if id, _, err := checkMessage(got); err != nil || id != i {
			t.Fatalf("conn %d received a message of sender %d (%v)", i, id, err)
		}
		noErr(t, "Read", readMany(ctx, cs[i], r.Descriptor(), 9, i, 1))
	}
}

// expectQuiet checks that no further message is waiting on c, by sending
// nothing and seeing Recv time out. Only a stray message can fail it.
func expectQuiet(ctx context.Context, c transport.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if got, err := c.Recv(ctx, nil); err == nil {
		id, seq, _ := checkMessage(got)
		return fmt.Errorf("stray message %d/%d (%d bytes)", id, seq, len(got))
	}
	return nil
}

func testBackpressure(t *testing.T, e *env) {
	ctx := guarded(t)
	c, s := e.connect()
	// The receiver does not consume: exactly Credits messages go through
	// without blocking...
	for seq := range e.credits {
		noErr(t, fmt.Sprintf("Send %d of %d credits", seq+1, e.credits), c.Send(ctx, message(0, seq, sizeFor(seq))))
	}
	// ...and the next one waits until its context ends (a correct
	// implementation blocks here however long we wait).
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := c.Send(short, message(0, 999999, 100))
	cancel()
	wantErr(t, fmt.Sprintf("Send beyond %d credits", e.credits), err, context.DeadlineExceeded)
	// Once the receiver consumes, the sender proceeds; the canceled message
	// was never delivered.
	next := async(func() error { return c.Send(ctx, message(0, e.credits, sizeFor(e.credits))) })
	noErr(t, "receive all", recvMany(ctx, s, e.credits+1))
	noErr(t, "Send after the receiver consumed", wait(t, "Send", next))
	// And the window is whole again.
	noErr(t, "refill", sendMany(ctx, c, 1, e.credits))
	noErr(t, "drain", recvMany(ctx, s, e.credits))
}

// testSendBatch: a BatchSender's batch of more messages than the peer has
// credits for arrives whole and in order while the peer consumes (frames
// held back for one socket write must go out before the sender waits for
// credits the peer returns only for frames it has), and a batch with a
// message too large sends exactly the ones before it.
func testSendBatch(t *testing.T, e *env) {
	ctx := guarded(t)
	c, s := e.connect()
	bs, ok := c.(transport.BatchSender)
	if !ok {
		t.Skip("this transport's connections are no transport.BatchSender: nothing to check")
	}
	n := 3*e.credits + 5
	msgs := make([][]byte, n)
	for seq := range n {
		msgs[seq] = message(2, seq, sizeFor(seq))
	}
	recv := async(func() error { return recvMany(ctx, s, n) })
	sent, err := bs.SendBatch(ctx, msgs)
	noErr(t, "SendBatch", err)
	if sent != n {
		t.Fatalf("SendBatch sent %d of %d", sent, n)
	}
	noErr(t, "receive the batch", wait(t, "Recv", recv))

	msgs = [][]byte{message(3, 0, sizeFor(0)), message(3, 1, sizeFor(1)), make([]byte, c.MaxMessage()+1), message(3, 2, sizeFor(2))}
	sent, err = bs.SendBatch(ctx, msgs)
	wantErr(t, "a batch with a message too large", err, transport.ErrMessageTooLarge)
	if sent != 2 {
		t.Fatalf("SendBatch sent %d before the message too large, want 2", sent)
	}
	noErr(t, "receive the messages before it", recvMany(ctx, s, 2))
	noErr(t, "nothing after it", expectQuiet(ctx, s))
}

func testRecvCanceled(t *testing.T, e *env) {
	ctx := guarded(t)
	c, s := e.connect()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := s.Recv(short, nil)
	cancel()
	wantErr(t, "Recv with nothing sent", err, context.DeadlineExceeded)
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Recv(done, nil)
	wantErr(t, "Recv with a canceled context", err, context.Canceled)
	// A canceled Recv consumed nothing.
	noErr(t, "Send", sendMany(ctx, c, 0, 3))
	noErr(t, "Recv after cancellations", recvMany(ctx, s, 3))
}
