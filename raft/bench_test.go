package raft

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	etcdraft "go.etcd.io/raft/v3"
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
// BenchmarkPut measures plain PUTs; with leases=1 a TTL lease exists, so
// every PUT also looks up (and clears) its key's lease attachment.
func BenchmarkPut(b *testing.B) {
	for _, bc := range []struct{ size, leases int }{{1, 0}, {1, 1}, {3, 0}, {3, 1}} {
		b.Run(fmt.Sprintf("nodes=%d/leases=%d", bc.size, bc.leases), func(b *testing.B) {
			cfg := testConfig()
			c := newClusterOn(b, newMemNet(), bc.size, cfg)
			lead := c.leader()
			for range bc.leases {
				if _, err := lead.node.Grant(context.Background(), 0, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
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
		MaxSizePerMsg: DefaultMaxSizePerMsg, MaxUncommittedEntriesSize: 1 << 40, Logger: raftLogger{testLogger()},
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
	l := &loop{n: &Node{id: 1, log: testLogger(), metrics: m, leases: newLessor()}, rn: rn, cfg: Config{MaxSizePerMsg: DefaultMaxSizePerMsg},
		isLeader: true, waiters: map[uint64]*proposal{}}
	c := command{op: opPut, proposer: 1, key: []byte("user:000123"), value: make([]byte, 256)}
	ps := make([]proposal, batch)
	b.ReportAllocs()
	for b.Loop() {
		for i := range ps {
			c.reqID++
			ps[i] = proposal{reqID: c.reqID, data: appendCommand(make([]byte, 0, commandSize(c)), c)}
			l.propose(&ps[i])
		}
		l.flushProposals()
		clear(l.waiters)
		drain()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/command")
}
