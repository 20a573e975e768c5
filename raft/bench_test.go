package raft

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	etcdraft "go.etcd.io/raft/v3"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
)

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

// BenchmarkProposeBatch measures the loop's side of proposing: queueing 64
// commands and proposing them as one raft message on a leader, per
// command (the Ready that follows is drained into memory, not Pebble).
func BenchmarkProposeBatch(b *testing.B) {
	const batch = 64
	ms := etcdraft.NewMemoryStorage()
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{
		ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: ms, MaxInflightMsgs: 256,
		MaxSizePerMsg: DefaultMaxSizePerMsg, MaxUncommittedEntriesSize: 1 << 40, Logger: raftLogger{peertest.Logger()},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := rn.Bootstrap([]etcdraft.Peer{{ID: 1}}); err != nil {
		b.Fatal(err)
	}
	drain := func() {
		for rn.HasReady() {
			rd := rn.Ready()
			if err := ms.Append(rd.Entries); err != nil {
				b.Fatal(err)
			}
			rn.Advance(rd)
		}
	}
	drain()
	if err := rn.Campaign(); err != nil {
		b.Fatal(err)
	}
	drain()
	m, _ := newMetrics(nil)
	l := &loop{n: &Node{id: 1, log: peertest.Logger(), metrics: m}, rn: rn, sm: nopSM{}, cfg: Config{MaxSizePerMsg: DefaultMaxSizePerMsg},
		isLeader: true, waiters: map[uint64]*proposal{}}
	enc := testCommand(testOpPut, []byte("user:000123"), make([]byte, 256))
	var reqID uint64
	ps := make([]proposal, batch)
	b.ReportAllocs()
	for b.Loop() {
		for i := range ps {
			reqID++
			ps[i] = proposal{reqID: reqID, data: enc(1, reqID)}
			l.propose(&ps[i])
		}
		l.flushProposals()
		clear(l.waiters)
		drain()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/command")
}
