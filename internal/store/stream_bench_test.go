package store

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// BenchmarkReplicaStream replays what one node writes in the 64-instance
// PUT shape of the benchmarks (64 client instances, 100k keys, 256 B values): per Ready a batch of new
// log entries, fsynced, together with the state writes of the batch before
// it (now committed), and every 10,000 entries a snapshot that truncates
// the log 5,000 behind, as raft.Config's defaults do. It reports the
// process's CPU per entry (user + system, Pebble's flushes and compactions
// included), which is what the store adds to each node's cost of a PUT.
//
// KVD_BENCH_MEMTABLE (bytes) overrides Options.MemTableSize for
// comparisons.
func BenchmarkReplicaStream(b *testing.B) {
	for _, batch := range []int{8, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			benchReplicaStream(b, batch)
		})
	}
}

func benchReplicaStream(b *testing.B, batch int) {
	opts := Options{}
	if v := os.Getenv("KVD_BENCH_MEMTABLE"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		opts.MemTableSize = n
	}
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const keys, valueSize, snapEvery, keep = 100_000, 256, 10_000, 5_000
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, valueSize)
	cmd := make([]byte, 40+valueSize) // about a PUT command's size
	term := uint64(1)
	var last, snapped uint64
	var prev []*pb.Entry
	key := func(e *pb.Entry) []byte { return fmt.Appendf(nil, "key%06d", binary.LittleEndian.Uint64(e.GetData())) }

	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		u := s.NewUpdate()
		ents := make([]*pb.Entry, batch)
		for j := range ents {
			last++
			data := append([]byte(nil), cmd...)
			binary.LittleEndian.PutUint64(data, rng.Uint64N(keys))
			ents[j] = &pb.Entry{Index: new(last), Term: new(term), Data: data}
		}
		if err := u.Append(ents); err != nil {
			b.Fatal(err)
		}
		for _, e := range prev {
			if err := u.Put(key(e), value, mod(e.GetIndex())); err != nil {
				b.Fatal(err)
			}
		}
		if len(prev) > 0 {
			if err := u.SetApplied(prev[len(prev)-1].GetIndex()); err != nil {
				b.Fatal(err)
			}
		}
		if err := u.SetHardState(&pb.HardState{Term: new(term), Commit: new(last - uint64(batch))}); err != nil {
			b.Fatal(err)
		}
		if err := u.Commit(true); err != nil {
			b.Fatal(err)
		}
		u.Close()
		prev = ents
		if applied := s.Applied(); applied >= snapped+snapEvery {
			if _, err := s.CreateSnapshot(applied - keep); err != nil {
				b.Fatal(err)
			}
			snapped = applied
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/entry")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
