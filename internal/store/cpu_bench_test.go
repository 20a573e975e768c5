package store

import (
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"testing"
)

// BenchmarkPutCPU is the process CPU (every goroutine's: Pebble's
// flushes and compactions included) per PUT as a raft node stores it: the
// log entry carrying it and then its apply, 8 to an Update, over 20,000
// keys of 256-byte values (the 64-instance PUT shape), with a snapshot
// and log compaction every 10,000 entries to 5,000 behind (raft's
// defaults): cpu-µs/op. Run it long (-benchtime=200000x) so that
// compactions have their share. "history" is this store's apply
// (Update.Put); "state-only" writes what the apply of the build before
// revisions wrote, the key's state alone, for the ratio. Both keep the
// raft log in Pebble; "wal" is "history" with the log in the "wal" mode,
// Pebble without its own log, and "wal+pebble-wal" the same with
// Pebble's log kept (Knobs.PebbleWAL), for the ratio; the memtable
// variants are "wal" with another memtable size than its default
// (pebbletune.NoWALMemTableSize). The "wal" modes
// fdatasync the log per Update (the entries it appends are applied in it).
// records/op and batch-B/op are what the Updates' Pebble batches held per
// PUT (the log entries among them in the Pebble raft log mode).
func BenchmarkPutCPU(b *testing.B) {
	for _, m := range []struct {
		name    string
		history bool
		opts    Options
	}{
		{"history", true, Options{}},
		{"state-only", false, Options{}},
		{"wal", true, Options{RaftLog: RaftLogWAL}},
		{"wal+pebble-wal", true, Options{RaftLog: RaftLogWAL, Knobs: Knobs{PebbleWAL: true}}},
		{"wal/memtable=4MiB", true, Options{RaftLog: RaftLogWAL, MemTableSize: 4 << 20}},
		{"wal/memtable=64MiB", true, Options{RaftLog: RaftLogWAL, MemTableSize: 64 << 20}},
	} {
		b.Run(m.name, func(b *testing.B) { benchPutCPU(b, m.history, m.opts) })
	}
}

func benchPutCPU(b *testing.B, history bool, opts Options) {
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, benchValueLen)
	key := make([]byte, 0, 16)
	var rev uint64
	entry := &pb.Entry{Term: proto.Uint64(1), Type: pb.EntryNormal.Enum()}
	batch := make([]*pb.Entry, 0, 8)
	var records, bytes uint64 // of the Updates' Pebble batches
	start := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; {
		u := s.NewUpdate()
		batch = batch[:0]
		for j := 0; j < 8 && i < b.N; j, i = j+1, i+1 {
			rev++
			fillValue(value)
			e := proto.CloneOf(entry)
			e.Index, e.Data = proto.Uint64(rev), append(appendBenchKey(nil, rev%20000), value...)
			batch = append(batch, e)
		}
		if err := u.Append(batch); err != nil {
			b.Fatal(err)
		}
		for _, e := range batch {
			rev := e.GetIndex()
			copy(value, e.GetData()[16:])
			key = appendBenchKey(key[:0], rev%20000)
			prev, err := u.Meta(key)
			if err != nil {
				b.Fatal(err)
			}
			m := prev.Next(rev, 0)
			if history {
				err = u.Put(key, value, m)
			} else {
				u.keyBuf = appendKVKey(u.keyBuf[:0], u.gen, key)
				u.valBuf = appendKVValue(u.valBuf[:0], m, value)
				err = u.b.Set(u.keyBuf, u.valBuf, nil)
			}
			if err == nil {
				err = u.SetRevision(rev) // per entry, as the state machine does
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := u.SetApplied(rev); err != nil {
			b.Fatal(err)
		}
		records, bytes = records+uint64(u.b.Count()), bytes+uint64(u.b.Len())
		if err := u.Commit(false); err != nil {
			b.Fatal(err)
		}
		if rev%10000 < 8 && rev > 5000 {
			if _, err := s.CreateSnapshot(rev - 5000); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(records)/float64(b.N), "records/op")
	b.ReportMetric(float64(bytes)/float64(b.N), "batch-B/op")
	m := s.db.Metrics()
	b.ReportMetric(float64(m.Compact.Count), "compactions")
	b.ReportMetric(float64(m.Total().TableBytesCompacted)/float64(b.N), "compacted-B/op")
	b.ReportMetric(float64(m.Total().TableBytesFlushed)/float64(b.N), "flushed-B/op")
	b.ReportMetric(float64(m.Total().TableBytesMoved)/float64(b.N), "moved-B/op")
}
