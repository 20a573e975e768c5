package kv

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/raft"
)

func TestInvalidRequests(t *testing.T) {
	c := newCluster(t, 1, testConfig())
	lead := c.leader()
	ctx := ctxT(t)
	tests := []struct {
		name       string
		key, value []byte
		err        error
	}{
		{"empty key", nil, []byte("v"), ErrInvalidKey},
		{"key too long", make([]byte, limits.MaxKey+1), nil, ErrInvalidKey},
		{"value too large", []byte("k"), make([]byte, limits.MaxValue+1), ErrValueTooLarge},
		{"largest allowed", make([]byte, limits.MaxKey), make([]byte, limits.MaxValue), nil},
	}
	for _, tt := range tests {
		_, err := lead.node.Put(ctx, tt.key, tt.value, raft.Admission{})
		if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.err)
		}
	}
	lead.node.Close()
	if _, err := lead.node.Put(ctx, []byte("k"), nil, raft.Admission{}); !errors.Is(err, raft.ErrStopped) && !errors.Is(err, raft.ErrNotLeader) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, _, _, err := lead.node.Get([]byte("k")); !errors.Is(err, raft.ErrStopped) {
		t.Errorf("Get after Close: %v", err)
	}
}

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

// BenchmarkPut measures plain PUTs; with leases=1 a TTL lease exists, so
// every PUT also looks up (and clears) its key's lease attachment.
func BenchmarkPut(b *testing.B) {
	for _, bc := range []struct{ size, leases int }{{1, 0}, {1, 1}, {3, 0}, {3, 1}} {
		b.Run(fmt.Sprintf("nodes=%d/leases=%d", bc.size, bc.leases), func(b *testing.B) {
			c := newCluster(b, bc.size, testConfig())
			lead := c.leader()
			for range bc.leases {
				if _, err := lead.node.Grant(context.Background(), 0, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			value := make([]byte, 100)
			var seq atomic.Uint64
			b.ReportAllocs()
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := make([]byte, 0, 32)
				for pb.Next() {
					key = fmt.Appendf(key[:0], "key%08d", seq.Add(1)%10000)
					if _, err := lead.node.Put(context.Background(), key, value, raft.Admission{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
