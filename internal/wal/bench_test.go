package wal

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/pebbletune"
)

// benchEntrySize is the data of one benchmark entry: a 256-byte PUT with
// its key and framing, about what kvbench's PUTs propose.
const benchEntrySize = 300

// keepEntries is how many entries both sides keep behind the last one
// when they truncate, every keepEntries appends, as a node does after a
// snapshot.
const keepEntries = 20000

// BenchmarkAppendSync compares the cost of making a batch of n entries and
// a HardState durable: through this log (one write, one fdatasync), and
// through a Pebble batch committed with Sync (what internal/store does
// today). One op is one batch; compare the two sub-benchmarks of the same n
// run side by side (go test -bench AppendSync -benchmem).
func BenchmarkAppendSync(b *testing.B) {
	for _, n := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("wal/n=%d", n), func(b *testing.B) { benchWAL(b, n) })
		b.Run(fmt.Sprintf("pebble/n=%d", n), func(b *testing.B) { benchPebble(b, n) })
	}
}

func benchBatch(next uint64, n int) ([]*pb.Entry, *pb.HardState) {
	es := make([]*pb.Entry, n)
	for i := range es {
		es[i] = &pb.Entry{Index: proto.Uint64(next + uint64(i)), Term: proto.Uint64(1), Data: make([]byte, benchEntrySize)}
	}
	return es, &pb.HardState{Term: proto.Uint64(1), Vote: proto.Uint64(1), Commit: proto.Uint64(next + uint64(n) - 1)}
}

func benchWAL(b *testing.B, n int) {
	l, _, err := Open(Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	// The spare a new log zero-fills in the background is a start-up
	// cost; in steady state compactions recycle segments.
	l.mu.Lock()
	l.collectSpare()
	l.mu.Unlock()
	next := uint64(1)
	b.SetBytes(int64(n * benchEntrySize))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		es, hs := benchBatch(next, n)
		if err := l.Append(es); err != nil {
			b.Fatal(err)
		}
		if err := l.SetHardState(hs); err != nil {
			b.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
		next += uint64(n)
		if next-l.FirstIndex() >= 2*keepEntries {
			if err := l.Compact(next - keepEntries); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportPerEntry(b, n, cpu0)
}

func benchPebble(b *testing.B, n int) {
	o := &pebble.Options{Logger: quietLogger{}}
	pebbletune.Apply(o, 0)
	db, err := pebble.Open(b.TempDir(), o)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	key := func(prefix byte, i uint64) []byte { return binary.BigEndian.AppendUint64([]byte{prefix}, i) }
	next, first := uint64(1), uint64(1)
	b.SetBytes(int64(n * benchEntrySize))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		es, hs := benchBatch(next, n)
		batch := db.NewBatch()
		for _, e := range es {
			v, _ := proto.Marshal(e)
			_ = batch.Set(key('l', e.GetIndex()), v, nil)
		}
		v, _ := proto.Marshal(hs)
		_ = batch.Set([]byte("mhs"), v, nil)
		next += uint64(n)
		if next-first >= 2*keepEntries {
			_ = batch.DeleteRange(key('l', first), key('l', next-keepEntries), nil)
			first = next - keepEntries
		}
		if err := batch.Commit(pebble.Sync); err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
	reportPerEntry(b, n, cpu0)
}

// processCPU is the user and system CPU time of the whole process, so
// that Pebble's background flushes and compactions count.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportPerEntry adds wall and CPU time per entry to the benchmark's
// output.
func reportPerEntry(b *testing.B, n int, cpu0 time.Duration) {
	entries := float64(b.N * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/entries, "ns/entry")
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/entries, "cpu-ns/entry")
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
