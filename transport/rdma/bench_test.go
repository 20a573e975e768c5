//go:build rdma

package rdma

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/transporttest"
)

// Compare with ib_read_lat (one READ, round trip) and ib_send_lat (half a
// ping-pong) from the same VM run: on Soft-RoCE only ratios mean anything.

// "events" is the default (adaptive spinning), "events-nospin" the
// completion channel alone.
var pollModes = []struct {
	name string
	cfg  Config
}{{"events", Config{}}, {"events-nospin", Config{SpinPoll: -1}}, {"busy", Config{Poll: PollBusy}}}

func BenchmarkRead(b *testing.B) {
	for _, pm := range pollModes {
		for _, bc := range []struct{ ops, size int }{{1, 64}, {3, 64}, {16, 64}, {1, 4096}, {1, 1 << 20}} {
			b.Run(fmt.Sprintf("%s/%dx%d", pm.name, bc.ops, bc.size), func(b *testing.B) {
				c, _, _, st := pair(b, pm.cfg)
				r := newRegion(b, st, 2<<20)
				ops := make([]transport.ReadOp, bc.ops)
				for i := range ops {
					ops[i] = transport.ReadOp{Remote: r.Descriptor(), Offset: uint64(i * 4096), Dst: make([]byte, bc.size)}
				}
				ctx := context.Background()
				lat := newLatencies(b)
				b.SetBytes(int64(bc.ops * bc.size))
				b.ReportAllocs()
				for b.Loop() {
					start := time.Now()
					if err := c.Read(ctx, ops); err != nil {
						b.Fatal(err)
					}
					lat.add(start)
				}
				lat.report(b)
			})
		}
	}
}

// BenchmarkPingPong measures a message round trip: Send, the peer's Recv
// and Send back, Recv.
func BenchmarkPingPong(b *testing.B) {
	for _, pm := range pollModes {
		for _, size := range []int{64, 4096} {
			b.Run(fmt.Sprintf("%s/%d", pm.name, size), func(b *testing.B) {
				c, s, _, _ := pair(b, pm.cfg)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go transporttest.Echo(ctx, s, size)
				msg, buf := make([]byte, size), make([]byte, 0, size)
				lat := newLatencies(b)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					start := time.Now()
					if err := c.Send(ctx, msg); err != nil {
						b.Fatal(err)
					}
					var err error
					if buf, err = c.Recv(ctx, buf); err != nil {
						b.Fatal(err)
					}
					lat.add(start)
				}
				lat.report(b)
			})
		}
	}
}

// BenchmarkStream measures one-way message throughput with the receiver
// keeping up.
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{64, 16 << 10, 1 << 20} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			c, s, _, _ := pair(b, Config{})
			ctx := context.Background()
			done := make(chan error, 1)
			n := b.N
			go func() {
				buf := make([]byte, 0, size)
				for range n {
					var err error
					if buf, err = s.Recv(ctx, buf); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			msg := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range n {
				if err := c.Send(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// latencies records per-operation times in a preallocated slice (no
// allocation in the measured loop) and reports percentiles in microseconds,
// and the CPU time the process (both ends) used per operation.
type latencies struct {
	d   []time.Duration
	cpu time.Duration
}

func newLatencies(b *testing.B) *latencies {
	return &latencies{d: make([]time.Duration, 0, max(b.N, 1<<16)), cpu: cpuTime()}
}

// cpuTime is the user and system time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (l *latencies) add(start time.Time) {
	if len(l.d) < cap(l.d) {
		l.d = append(l.d, time.Since(start))
	}
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	us := func(q float64) float64 { return float64(l.d[int(q*float64(len(l.d)-1))]) / 1e3 }
	b.ReportMetric(us(0.5), "p50-us")
	b.ReportMetric(us(0.99), "p99-us")
	b.ReportMetric(us(1), "max-us")
	b.ReportMetric(float64(cpuTime()-l.cpu)/1e3/float64(len(l.d)), "cpu-us/op")
}
