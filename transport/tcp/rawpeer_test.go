package tcp

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// A raw peer speaks the wire protocol by hand, to check the format doc.go
// describes and how a Transport treats peers that break it.

func okHello() hello {
	return hello{version: helloVersion, maxMessage: 1 << 20, credits: 4, maxReads: 4, node: "raw"}
}

// dialRaw connects to a Transport's listener and exchanges hellos.
func dialRaw(t *testing.T, addr string, h hello) (net.Conn, hello) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := nc.Write(h.marshal()); err != nil {
		t.Fatal(err)
	}
	peer, err := readHello(nc)
	if err != nil {
		t.Fatalf("raw peer: reading the transport's hello: %v", err)
	}
	return nc, peer
}

// rawPair returns a Transport's accepted conn and a raw peer connected to it.
func rawPair(t *testing.T, cfg Config, h hello) (*Transport, transport.Conn, net.Conn) {
	t.Helper()
	tr := newTestTransport(t, cfg)
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := dialRaw(t, ln.Addr(), h)
	c, err := ln.Accept(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return tr, c, nc
}

func frame(h header, payload []byte) []byte {
	b := make([]byte, headerSize, headerSize+len(payload))
	h.put(b)
	return append(b, payload...)
}

func ops(o ...wireOp) []byte {
	b := make([]byte, len(o)*opSize)
	for i, op := range o {
		op.put(b[i*opSize:])
	}
	return b
}

func readFrameHeader(t *testing.T, r io.Reader) header {
	t.Helper()
	var b [headerSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		t.Fatalf("raw peer: read frame header: %v", err)
	}
	return header{typ: frameType(b[0]), a: b[1], b: b[2], id: binary.LittleEndian.Uint32(b[4:]),
		length: binary.LittleEndian.Uint64(b[8:])}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
