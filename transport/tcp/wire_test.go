package tcp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// TestWireServing checks, byte by byte, what a Transport sends a peer, as
// doc.go describes it.
func TestWireServing(t *testing.T) {
	tr, c, nc := rawPair(t, Config{Credits: 2}, okHello())
	ctx := testCtx(t)
	r, err := tr.Register(1000)
	if err != nil {
		t.Fatal(err)
	}
	fillBytes(r.Bytes())
	d := r.Descriptor()

	// A MSG is delivered; consuming it returns its credit, in a CREDIT frame
	// or riding on the next MSG.
	if _, err := nc.Write(frame(header{typ: frameMsg, length: 5}, []byte("hello"))); err != nil {
		t.Fatal(err)
	}
	got, err := c.Recv(ctx, nil)
	if err != nil || string(got) != "hello" {
		t.Fatalf("Recv = %q, %v", got, err)
	}
	if err := c.Send(ctx, []byte("world")); err != nil {
		t.Fatal(err)
	}
	// The credit rides on the MSG, or comes in a CREDIT frame, which the
	// serve loop may write after the MSG: read until both are in.
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	credits, sawMsg := 0, false
	for !sawMsg || credits == 0 {
		h := readFrameHeader(t, nc)
		credits += int(h.id)
		if h.typ == frameCredit {
			continue
		}
		payload := make([]byte, h.length)
		io.ReadFull(nc, payload)
		if h.typ != frameMsg || string(payload) != "world" {
			t.Fatalf("got frame %+v %q, want MSG \"world\"", h, payload)
		}
		sawMsg = true
	}
	nc.SetReadDeadline(time.Time{})
	if credits != 1 {
		t.Fatalf("%d credits returned for one message consumed", credits)
	}

	// READs: data in op order, then the trailer; failures as a status.
	tests := []struct {
		name string
		ops  []wireOp
		want header
	}{
		{"two ops", []wireOp{{addr: d.Addr + 10, n: 5, key: d.Key}, {addr: d.Addr + 990, n: 10, key: d.Key}},
			header{typ: frameReadResp, id: 7, length: 15 + trailerSize}},
		{"bad key", []wireOp{{addr: d.Addr, n: 5, key: d.Key}, {addr: d.Addr, n: 5, key: d.Key + 1}},
			header{typ: frameReadResp, a: byte(statusBadKey), b: 1, id: 7}},
		{"out of range", []wireOp{{addr: d.Addr + 996, n: 5, key: d.Key}},
			header{typ: frameReadResp, a: byte(statusOutOfRange), id: 7}},
		{"below the base", []wireOp{{addr: d.Addr - 1, n: 1, key: d.Key}},
			header{typ: frameReadResp, a: byte(statusOutOfRange), id: 7}},
	}
	for _, tt := range tests {
		req := frame(header{typ: frameReadReq, a: uint8(len(tt.ops)), id: 7, length: uint64(len(tt.ops) * opSize)}, ops(tt.ops...))
		if _, err := nc.Write(req); err != nil {
			t.Fatal(err)
		}
		h := readFrameHeader(t, nc)
		if h != tt.want {
			t.Fatalf("%s: response header %+v, want %+v", tt.name, h, tt.want)
		}
		if h.a != 0 {
			continue
		}
		payload := make([]byte, h.length)
		if _, err := io.ReadFull(nc, payload); err != nil {
			t.Fatal(err)
		}
		var want []byte
		for _, op := range tt.ops {
			off := op.addr - d.Addr
			want = append(want, r.Bytes()[off:off+uint64(op.n)]...)
		}
		want = append(want, byte(statusOK), 0)
		if !bytes.Equal(payload, want) {
			t.Fatalf("%s: payload %x, want %x", tt.name, payload, want)
		}
	}
}

// TestWireReading plays a server by hand, to check the READ_REQ a Transport
// sends and how it takes each kind of READ_RESP.
func TestWireReading(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		nc.Write(okHello().marshal())
		readHello(nc)
		peer <- nc
	}()
	tr := newTestTransport(t, Config{})
	ctx := testCtx(t)
	c, err := tr.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc := <-peer
	defer nc.Close()
	d := transport.Descriptor{Addr: 0x7000, Len: 100, Key: 42}
	ops := []transport.ReadOp{{Remote: d, Offset: 1, Dst: make([]byte, 3)}, {Remote: d, Offset: 50, Dst: make([]byte, 2)}}

	// answer reads one READ_REQ, checks it, and sends resp.
	answer := func(resp []byte) {
		h := readFrameHeader(t, nc)
		req := make([]byte, h.length)
		io.ReadFull(nc, req)
		if h.typ != frameReadReq || h.a != 2 {
			t.Errorf("request header %+v, want a READ_REQ of 2 ops", h)
		}
		want := []wireOp{{addr: 0x7001, n: 3, key: 42}, {addr: 0x7032, n: 2, key: 42}}
		for i, w := range want {
			if got := parseOp(req[i*opSize:]); got != w {
				t.Errorf("op %d on the wire: %+v, want %+v", i, got, w)
			}
		}
		resp[4] = byte(h.id) // answer the request's id
		nc.Write(resp)
	}
	respond := func(resp []byte) error {
		done := make(chan struct{})
		go func() { answer(resp); close(done) }()
		err := c.Read(ctx, ops)
		<-done
		return err
	}

	ok := frame(header{typ: frameReadResp, length: 5 + trailerSize}, []byte{1, 2, 3, 4, 5, 0, 0})
	if err := respond(ok); err != nil || string(ops[0].Dst) != "\x01\x02\x03" || string(ops[1].Dst) != "\x04\x05" {
		t.Fatalf("Read = %v, Dst %x %x", err, ops[0].Dst, ops[1].Dst)
	}
	err = respond(frame(header{typ: frameReadResp, a: byte(statusOutOfRange), b: 1}, nil))
	if !errors.Is(err, transport.ErrOutOfRange) || !strings.Contains(err.Error(), "op 1: offset 50 + length 2") {
		t.Fatalf("out of range: Read = %v", err)
	}
	// The region vanished while being copied: the trailer says so.
	err = respond(frame(header{typ: frameReadResp, length: 5 + trailerSize}, []byte{0, 0, 0, 0, 0, byte(statusBadKey), 1}))
	if !errors.Is(err, transport.ErrBadKey) || !strings.Contains(err.Error(), "op 1") {
		t.Fatalf("bad key in the trailer: Read = %v", err)
	}
	// A response of the wrong length breaks the connection.
	err = respond(frame(header{typ: frameReadResp, length: 4 + trailerSize}, make([]byte, 6)))
	if !errors.Is(err, transport.ErrProtocol) || !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("short response: Read = %v, want ErrProtocol and ErrClosed", err)
	}
}

func fillBytes(b []byte) {
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
}
