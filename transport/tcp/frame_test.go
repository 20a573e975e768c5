package tcp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/kvd-project/kvd/transport"
)

func TestParseHeader(t *testing.T) {
	const maxMsg = 1000
	tests := []struct {
		name string
		h    header
		ok   bool
	}{
		{"MSG", header{typ: frameMsg, length: 10}, true},
		{"MSG carrying credits", header{typ: frameMsg, id: 3}, true},
		{"MSG at max", header{typ: frameMsg, length: maxMsg}, true},
		{"MSG over max", header{typ: frameMsg, length: maxMsg + 1}, false},
		{"MSG huge", header{typ: frameMsg, length: 1 << 63}, false},
		{"MSG with flags", header{typ: frameMsg, a: 1}, false},
		{"CREDIT", header{typ: frameCredit, id: 5}, true},
		{"CREDIT of 0", header{typ: frameCredit}, false},
		{"CREDIT with payload", header{typ: frameCredit, id: 1, length: 1}, false},
		{"READ_REQ", header{typ: frameReadReq, a: 3, length: 3 * opSize}, true},
		{"READ_REQ max batch", header{typ: frameReadReq, a: transport.MaxBatch, length: transport.MaxBatch * opSize}, true},
		{"READ_REQ no ops", header{typ: frameReadReq}, false},
		{"READ_REQ too many ops", header{typ: frameReadReq, a: transport.MaxBatch + 1, length: (transport.MaxBatch + 1) * opSize}, false},
		{"READ_REQ wrong length", header{typ: frameReadReq, a: 2, length: opSize}, false},
		{"READ_RESP ok", header{typ: frameReadResp, length: 10 + trailerSize}, true},
		{"READ_RESP ok, no trailer", header{typ: frameReadResp, length: 1}, false},
		{"READ_RESP ok with op index", header{typ: frameReadResp, b: 1, length: trailerSize}, false},
		{"READ_RESP bad key", header{typ: frameReadResp, a: byte(statusBadKey), b: 3}, true},
		{"READ_RESP failure with data", header{typ: frameReadResp, a: byte(statusOutOfRange), length: 1}, false},
		{"READ_RESP unknown status", header{typ: frameReadResp, a: numStatus}, false},
		{"READ_RESP op index past batch", header{typ: frameReadResp, a: 1, b: transport.MaxBatch}, false},
		{"type 0", header{}, false},
		{"type 5", header{typ: 5}, false},
	}
	for _, tt := range tests {
		var b [headerSize]byte
		tt.h.put(b[:])
		got, err := parseHeader(b[:], maxMsg)
		if tt.ok != (err == nil) {
			t.Errorf("%s: parseHeader = %v, want ok=%v", tt.name, err, tt.ok)
			continue
		}
		if err != nil && !errors.Is(err, transport.ErrProtocol) {
			t.Errorf("%s: error %v does not wrap ErrProtocol", tt.name, err)
		}
		if err == nil && got != tt.h {
			t.Errorf("%s: parseHeader = %+v, want %+v", tt.name, got, tt.h)
		}
	}
	var b [headerSize]byte
	header{typ: frameMsg}.put(b[:])
	b[3] = 1
	if _, err := parseHeader(b[:], maxMsg); !errors.Is(err, transport.ErrProtocol) {
		t.Errorf("reserved byte set: parseHeader = %v, want ErrProtocol", err)
	}
	if _, err := parseHeader(b[:5], maxMsg); !errors.Is(err, transport.ErrProtocol) {
		t.Errorf("short header: parseHeader = %v, want ErrProtocol", err)
	}
}

// FuzzFrameHeader checks that the header decoder never panics, and that
// whatever it accepts encodes back to the same bytes.
func FuzzFrameHeader(f *testing.F) {
	for _, h := range []header{
		{typ: frameMsg, id: 1, length: 100},
		{typ: frameCredit, id: 4},
		{typ: frameReadReq, a: 2, id: 9, length: 2 * opSize},
		{typ: frameReadResp, id: 9, length: 50},
		{typ: frameReadResp, a: 2, b: 1, id: 9},
	} {
		var b [headerSize]byte
		h.put(b[:])
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parseHeader(data, 1<<20)
		if err != nil {
			if !errors.Is(err, transport.ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		var b [headerSize]byte
		h.put(b[:])
		if !bytes.Equal(b[:], data[:headerSize]) {
			t.Fatalf("accepted %x, re-encodes as %x", data[:headerSize], b)
		}
	})
}

// fuzzKey and fuzzAddr name the region a stream fuzzed by FuzzFrameStream
// can READ.
const (
	fuzzKey  = 0x1234
	fuzzAddr = 0x10000
)

// FuzzFrameStream feeds arbitrary bytes to a connection, as a peer past the
// handshake: it must never crash or hang, and must end closed (with
// ErrProtocol if the bytes broke the protocol).
func FuzzFrameStream(f *testing.F) {
	seeds := [][]byte{
		frame(header{typ: frameMsg, length: 5}, []byte("hello")),
		frame(header{typ: frameCredit, id: 1}, nil),
		frame(header{typ: frameReadReq, a: 2, id: 1, length: 2 * opSize},
			ops(wireOp{addr: fuzzAddr, n: 100, key: fuzzKey}, wireOp{addr: fuzzAddr + 4000, n: 96, key: fuzzKey})),
		frame(header{typ: frameReadReq, a: 1, length: opSize}, ops(wireOp{addr: fuzzAddr, n: 5000, key: fuzzKey})),
		frame(header{typ: frameReadReq, a: 1, length: opSize}, ops(wireOp{addr: fuzzAddr, n: 1, key: 7})),
		frame(header{typ: frameReadResp, a: 1}, nil),
		append(frame(header{typ: frameMsg}, nil), frame(header{typ: frameMsg, length: 2}, []byte("hi"))...),
		[]byte("GET / HTTP/1.1\r\n\r\n"),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := New(Config{Credits: 4, MaxOutstandingReads: 4, MaxMessage: 1 << 16})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		tr.regions.newKey = func() uint32 { return fuzzKey }
		r, err := tr.Register(4096)
		if err != nil {
			t.Fatal(err)
		}
		r.(*region).desc.Addr = fuzzAddr // a base the fuzzer can name
		a, b := net.Pipe()
		c := newConn(tr, a, "fuzz", tr.hello(), okHello())
		if err := tr.adopt(c); err != nil {
			t.Fatal(err)
		}
		c.start()
		go io.Copy(io.Discard, b)
		b.Write(data)
		b.Close()
		<-c.closed
		if !errors.Is(c.err, transport.ErrClosed) {
			t.Fatalf("conn ended with %v, want ErrClosed", c.err)
		}
		c.Close()
	})
}

// TestProtocolViolations sends frames that break the protocol and checks
// that the connection closes with ErrProtocol.
func TestProtocolViolations(t *testing.T) {
	msg := frame(header{typ: frameMsg, length: 1}, []byte{1})
	reserved := frame(header{typ: frameMsg}, nil)
	reserved[3] = 1
	tests := []struct {
		name  string
		bytes []byte
	}{
		{"unknown frame type", frame(header{typ: 9}, nil)},
		{"reserved byte set", reserved},
		{"MSG over the negotiated max", frame(header{typ: frameMsg, length: 1001}, make([]byte, 1001))},
		{"MSGs beyond the credits", bytes.Repeat(msg, 3)},
		{"CREDIT beyond the window", frame(header{typ: frameCredit, id: 1}, nil)},
		{"MSG returning credits beyond the window", frame(header{typ: frameMsg, id: 1}, nil)},
		{"CREDIT of zero", frame(header{typ: frameCredit}, nil)},
		{"READ_REQ without ops", frame(header{typ: frameReadReq}, nil)},
		{"READ_REQ of 17 ops", frame(header{typ: frameReadReq, a: 17, length: 17 * opSize}, make([]byte, 17*opSize))},
		{"READ_RESP to nothing", frame(header{typ: frameReadResp, a: 1}, nil)},
		{"READ_RESP to an unknown id", frame(header{typ: frameReadResp, a: 1, id: 1 << 30}, nil)},
	}
	for _, tt := range tests {
		_, c, nc := rawPair(t, Config{Credits: 2, MaxOutstandingReads: 2, MaxMessage: 1000}, okHello())
		if _, err := nc.Write(tt.bytes); err != nil {
			t.Fatal(err)
		}
		// Every case breaks the protocol, so the read loop closes the conn
		// once it has taken every frame: wait for that before the first
		// Recv, which frees a queue slot and would let a MSG beyond the
		// credits in.
		ctx := testCtx(t)
		select {
		case <-c.(*conn).closed:
		case <-ctx.Done():
			t.Fatalf("%s: the conn did not close", tt.name)
		}
		var err error
		for err == nil { // valid MSGs before the violation are delivered
			_, err = c.Recv(ctx, nil)
		}
		if !errors.Is(err, transport.ErrProtocol) || !errors.Is(err, transport.ErrClosed) {
			t.Errorf("%s: Recv = %v, want ErrProtocol and ErrClosed", tt.name, err)
		}
	}
}

// TestTooManyReadBatches checks that a peer may not have more READ batches
// in flight than this end announced.
func TestTooManyReadBatches(t *testing.T) {
	tr := newTestTransport(t, Config{MaxOutstandingReads: 2})
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := newConn(tr, a, "pipe", tr.hello(), okHello()) // not started: nothing serves
	req := ops(wireOp{addr: 1, n: 1, key: 1})
	c.br = bufio.NewReader(bytes.NewReader(bytes.Repeat(req, 3)))
	h := header{typ: frameReadReq, a: 1, length: opSize}
	for i := range 2 {
		if err := c.onReadReq(h); err != nil {
			t.Fatalf("READ_REQ %d of 2: %v", i+1, err)
		}
	}
	if err := c.onReadReq(h); !errors.Is(err, transport.ErrProtocol) {
		t.Fatalf("third READ_REQ in flight = %v, want ErrProtocol", err)
	}
}
