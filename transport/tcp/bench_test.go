package tcp

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/transporttest"
)

// benchPair returns both ends of a connection between two transports.
func benchPair(b testing.TB) (client, server transport.Conn, srv *Transport) {
	b.Helper()
	return benchPairWith(b, Config{}, Config{})
}

// benchPairWith is benchPair with the server's and the client's configs.
func benchPairWith(b testing.TB, srvCfg, cliCfg Config) (client, server transport.Conn, srv *Transport) {
	b.Helper()
	srv = newTestTransport(b, srvCfg)
	cli := newTestTransport(b, cliCfg)
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

// BenchmarkTLS sets plaintext against TLS 1.3 (client certificates
// verified) on the same paths: a one-sided GET's READ batches (its first
// round trip, header and two buckets; and a record) and message round trips.
// Compare the plain and tls sub-benchmarks of each.
func BenchmarkTLS(b *testing.B) {
	p := newTestPKI(b)
	modes := []struct {
		name     string
		srv, cli Config
	}{
		{"plain", Config{}, Config{}},
		{"tls", Config{TLS: p.mutual().config()}, Config{TLS: dialTLS(transport.RoleClient, p.clientCA, p.client)}},
	}
	for _, bc := range []struct {
		name      string
		ops, size int
	}{{"Read/3x64B", 3, 64}, {"Read/1x4KiB", 1, 4 << 10}} {
		for _, m := range modes {
			b.Run(bc.name+"/"+m.name, func(b *testing.B) {
				c, _, srv := benchPairWith(b, m.srv, m.cli)
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
				defer reportCPU(b)()
				for b.Loop() {
					if err := c.Read(ctx, ops); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	// Many GETs in flight on one connection: bound by CPU, not latency.
	for _, m := range modes {
		b.Run("ReadParallel/3x64B/"+m.name, func(b *testing.B) {
			c, _, srv := benchPairWith(b, m.srv, m.cli)
			r, err := srv.Register(3 * 64)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.SetBytes(3 * 64)
			b.ReportAllocs()
			b.SetParallelism(8)
			defer reportCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				ops := make([]transport.ReadOp, 3)
				for i := range ops {
					ops[i] = transport.ReadOp{Remote: r.Descriptor(), Offset: uint64(i * 64), Dst: make([]byte, 64)}
				}
				for pb.Next() {
					if err := c.Read(ctx, ops); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	for _, size := range []int{64, 4 << 10} {
		for _, m := range modes {
			b.Run("SendRecv/"+byteSize(size)+"/"+m.name, func(b *testing.B) {
				c, s, _ := benchPairWith(b, m.srv, m.cli)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go transporttest.Echo(ctx, s, size)
				msg := make([]byte, size)
				buf := make([]byte, 0, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				defer reportCPU(b)()
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
}

// reportCPU starts measuring the process's CPU time (both ends of the
// connection run in it); the returned function reports it per op as
// cpu-ns/op, which other load on a shared machine disturbs far less than
// ns/op.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
