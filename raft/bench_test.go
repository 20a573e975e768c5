package raft

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

func BenchmarkCommandCodec(b *testing.B) {
	c := command{op: opPut, proposer: 3, reqID: 1 << 40, key: []byte("user:000123"), value: make([]byte, 100)}
	buf := make([]byte, 0, commandSize(c))
	b.ReportAllocs()
	for b.Loop() {
		buf = appendCommand(buf[:0], c)
		if _, err := decodeCommand(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPut measures replicated, fsynced writes from many concurrent
// callers, and how many of them shared each fsync (group commit).
func BenchmarkPut(b *testing.B) {
	for _, size := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			cfg := testConfig()
			c := newClusterOn(b, newMemNet(), size, cfg)
			lead := c.leader()
			value := make([]byte, 100)
			var seq atomic.Uint64
			syncs0 := syncCount(lead.node)
			b.ReportAllocs()
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := make([]byte, 0, 32)
				for pb.Next() {
					key = fmt.Appendf(key[:0], "key%08d", seq.Add(1)%10000)
					if _, err := lead.node.Put(context.Background(), key, value); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			if syncs := syncCount(lead.node) - syncs0; syncs > 0 {
				b.ReportMetric(float64(b.N)/float64(syncs), "puts/fsync")
			}
		})
	}
}

func syncCount(n *Node) uint64 {
	var m dto.Metric
	if err := n.metrics.syncDuration.Write(&m); err != nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}
