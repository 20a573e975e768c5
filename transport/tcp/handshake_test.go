package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/transport"
)

// serveHello accepts one connection, reads the dialer's hello, answers
// with hello bytes b and hangs up once the dialer does.
func serveHello(t *testing.T, b []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if _, err := readHello(nc); err != nil {
			return
		}
		nc.Write(b)
		if len(b) >= helloSize {
			io.Copy(io.Discard, nc)
		}
	}()
	return ln.Addr().String()
}

func TestDialRejectsBadHello(t *testing.T) {
	good := okHello().marshal()
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	tests := []struct {
		name  string
		hello []byte
		want  string
	}{
		{"magic", edit(func(b []byte) { copy(b, "HTTP") }), "not a kvd endpoint"},
		{"version", edit(func(b []byte) { binary.LittleEndian.PutUint16(b[4:], 2) }), "version 2"},
		{"max message 0", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[8:], 0) }), "max message 0"},
		{"max message 2 GiB", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[8:], 2<<30) }), "max message"},
		{"credits 0", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[12:], 0) }), "credits 0"},
		{"reads 0", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[16:], 0) }), "outstanding reads 0"},
		{"reserved", edit(func(b []byte) { b[20] = 1 }), "reserved"},
		{"name too long", edit(func(b []byte) { binary.LittleEndian.PutUint16(b[6:], 256) }), "256 bytes"},
	}
	tr := newTestTransport(t, Config{})
	for _, tt := range tests {
		_, err := tr.Dial(testCtx(t), serveHello(t, tt.hello))
		if !errors.Is(err, transport.ErrProtocol) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Dial = %v, want ErrProtocol mentioning %q", tt.name, err, tt.want)
		}
	}
	// A peer that hangs up before answering.
	_, err := tr.Dial(testCtx(t), serveHello(t, good[:10]))
	if !errors.Is(err, transport.ErrClosed) {
		t.Errorf("truncated hello: Dial = %v, want ErrClosed", err)
	}
}

// TestDialSilentPeerIsNotAnEndpoint: a server that accepts and waits for
// its client to speak first (HTTP, e.g. kvd's metrics port) is named "not
// a kvd endpoint" when the dial gives up, where the error was a bare
// deadline. A kvd listener sends its hello unasked, so silence is the mark.
func TestDialSilentPeerIsNotAnEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { nc.Close() })
		}
	}()
	tr := newTestTransport(t, Config{DialTimeout: 100 * time.Millisecond})
	_, err = tr.Dial(testCtx(t), ln.Addr().String())
	if !errors.Is(err, errs.ErrNotEndpoint) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial of a silent server = %v, want ErrNotEndpoint and the deadline", err)
	}
}

func TestListenerRejectsBadHello(t *testing.T) {
	tr := newTestTransport(t, Config{})
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bad := okHello()
	bad.version = 7
	if _, err := nc.Write(bad.marshal()); err != nil {
		t.Fatal(err)
	}
	// The listener sends its hello, then hangs up on us.
	if _, err := readHello(nc); err != nil {
		t.Fatalf("reading the listener's hello: %v", err)
	}
	if n, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatalf("after a bad hello the listener sent %d more bytes; want it to hang up", n)
	}
	// And never delivers the connection.
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Millisecond)
	defer cancel()
	if c, err := ln.Accept(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Accept = %v, %v; want no connection", c, err)
	}
}

func TestDialTimesOutInHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and says nothing
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
		}
	}()
	tr := newTestTransport(t, Config{DialTimeout: 30 * time.Millisecond})
	if _, err := tr.Dial(context.Background(), ln.Addr().String()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial to a silent peer with DialTimeout = %v, want DeadlineExceeded", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	tr2 := newTestTransport(t, Config{})
	if _, err := tr2.Dial(ctx, ln.Addr().String()); !errors.Is(err, context.Canceled) {
		t.Errorf("Dial to a silent peer, canceled = %v, want Canceled", err)
	}
}

func TestNegotiation(t *testing.T) {
	srv := newTestTransport(t, Config{MaxMessage: 1000, Credits: 2, MaxOutstandingReads: 1})
	cli := newTestTransport(t, Config{Node: "client"})
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	cc, err := cli.Dial(ctx, ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, s := cc.(*conn), sc.(*conn)
	if c.MaxMessage() != 1000 || s.MaxMessage() != 1000 {
		t.Errorf("MaxMessage: client %d, server %d; want the smaller, 1000", c.MaxMessage(), s.MaxMessage())
	}
	if cap(c.msgs.window) != 2 || cap(s.msgs.window) != transport.DefaultCredits {
		t.Errorf("send windows: client %d, server %d; want 2 and %d", cap(c.msgs.window), cap(s.msgs.window), transport.DefaultCredits)
	}
	if len(c.reads.all) != 1 || len(s.reads.all) != 1 {
		t.Errorf("usable read slots: client %d, server %d; want 1 (the server's limit)", len(c.reads.all), len(s.reads.all))
	}
	if c.peer != ln.Addr() || s.peer != "client" {
		t.Errorf("peer names: client sees %q, server sees %q; want %q and %q", c.peer, s.peer, ln.Addr(), "client")
	}
	if err := c.Send(ctx, make([]byte, 1001)); !errors.Is(err, transport.ErrMessageTooLarge) {
		t.Errorf("Send(1001 bytes) = %v, want ErrMessageTooLarge", err)
	}
}
