package kvdtest

import (
	"context"
	"testing"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// FakeAct is what a FakeNode does with a request, besides the response.
type FakeAct int

const (
	FakeReply FakeAct = iota // send the response
	FakeHang                 // send nothing (an answer lost, a stalled node)
	FakeDrop                 // close the connection instead
)

// FakeAnswer decides a FakeNode's answer to req. region is the node's
// table region (formatted and empty), for a hello's geometry. It is called
// from each connection's goroutine; Op and ID are filled in afterwards.
type FakeAnswer func(req *wire.Request, region transport.Descriptor) (wire.Response, FakeAct)

// LeaderHello is a FakeAnswer's reply value to a hello: node 1, leading,
// with region's geometry.
func LeaderHello(region transport.Descriptor) []byte {
	return wire.AppendHello(nil, &wire.Hello{NodeID: 1, LeaderID: 1,
		RegionAddr: region.Addr, RegionLen: region.Len, RegionKey: region.Key})
}

// FakeNode serves kvd's wire protocol by hand over the tcp transport, for
// client tests that need a node to misbehave exactly: every request gets
// answer's answer. It returns the node's address; it stops with the test.
func FakeNode(t testing.TB, answer FakeAnswer) string {
	t.Helper()
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	region, err := tr.Register(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Format(region.Bytes(), table.Config{}); err != nil {
		t.Fatal(err)
	}
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); ln.Close(); region.Close(); tr.Close() })
	go func() {
		for {
			conn, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			go serveFake(ctx, conn, region.Descriptor(), answer)
		}
	}()
	return ln.Addr()
}

func serveFake(ctx context.Context, conn transport.Conn, d transport.Descriptor, answer FakeAnswer) {
	defer conn.Close()
	var buf []byte
	for {
		b, err := conn.Recv(ctx, buf[:0])
		if err != nil {
			return
		}
		buf = b
		var req wire.Request
		if wire.DecodeRequest(b, &req) != nil {
			return
		}
		resp, act := answer(&req, d)
		switch act {
		case FakeDrop:
			return
		case FakeHang:
			continue
		}
		resp.Op, resp.ID = req.Op, req.ID
		if conn.Send(ctx, wire.AppendResponse(nil, &resp)) != nil {
			return
		}
	}
}
