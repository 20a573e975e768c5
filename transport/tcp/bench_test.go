package tcp

import (
	"context"
	"strconv"
	"testing"

	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/transporttest"
)

// benchPair returns both ends of a connection between two transports.
func benchPair(b *testing.B) (client, server transport.Conn, srv *Transport) {
	b.Helper()
	srv = newTestTransport(b, Config{})
	cli := newTestTransport(b, Config{})
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	client, err = cli.Dial(ctx, ln.Addr())
	if err != nil {
		b.Fatal(err)
	}
	server, err = ln.Accept(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return client, server, srv
}

func BenchmarkRead(b *testing.B) {
	for _, bc := range []struct {
		name      string
		ops, size int
	}{
		{"1x64B", 1, 64},
		{"3x64B", 3, 64}, // a GET's first round trip: header and two buckets
		{"16x4KiB", 16, 4 << 10},
		{"1x1MiB", 1, 1 << 20},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, _, srv := benchPair(b)
			r, err := srv.Register(bc.ops * bc.size)
			if err != nil {
				b.Fatal(err)
			}
			ops := make([]transport.ReadOp, bc.ops)
			for i := range ops {
				ops[i] = transport.ReadOp{Remote: r.Descriptor(), Offset: uint64(i * bc.size), Dst: make([]byte, bc.size)}
			}
			ctx := context.Background()
			b.SetBytes(int64(bc.ops * bc.size))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Read(ctx, ops); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadParallel measures many goroutines sharing one connection.
func BenchmarkReadParallel(b *testing.B) {
	c, _, srv := benchPair(b)
	r, err := srv.Register(4096)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ops := []transport.ReadOp{{Remote: r.Descriptor(), Dst: make([]byte, 64)}}
		for pb.Next() {
			if err := c.Read(ctx, ops); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSendRecv measures a message round trip: Send, the peer echoes,
// Recv.
func BenchmarkSendRecv(b *testing.B) {
	for _, size := range []int{64, 4 << 10} {
		b.Run(byteSize(size), func(b *testing.B) {
			c, s, _ := benchPair(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go transporttest.Echo(ctx, s, size)
			msg := make([]byte, size)
			buf := make([]byte, 0, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Send(ctx, msg); err != nil {
					b.Fatal(err)
				}
				var err error
				if buf, err = c.Recv(ctx, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<10 {
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
