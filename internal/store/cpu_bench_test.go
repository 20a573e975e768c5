package store

import (
	"errors"
	"testing"
)

// BenchmarkPutCPU is the process CPU (every goroutine's: Pebble's
// flushes and compactions included) per PUT applied as the state machine
// applies them, 8 to an Update, over 20,000 keys of 256-byte values, the
// 64-instance PUT shape: cpu-µs/op. Run it long (-benchtime=200000x) so
// that compactions have their share.
func BenchmarkPutCPU(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, benchValueLen)
	key := make([]byte, 0, 16)
	var rev uint64
	start := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; {
		u := s.NewUpdate()
		for j := 0; j < 8 && i < b.N; j, i = j+1, i+1 {
			rev++
			fillValue(value)
			key = appendBenchKey(key[:0], rev%20000)
			prev, err := u.Meta(key)
			if err != nil {
				b.Fatal(err)
			}
			if err := u.Put(key, value, prev.Next(rev, 0)); err != nil {
				b.Fatal(err)
			}
		}
		if err := errors.Join(u.SetRevision(rev), u.SetApplied(rev)); err != nil {
			b.Fatal(err)
		}
		if err := u.Commit(false); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
	m := s.db.Metrics()
	b.ReportMetric(float64(m.Compact.Count), "compactions")
	b.ReportMetric(float64(m.Total().TableBytesCompacted)/float64(b.N), "compacted-B/op")
	b.ReportMetric(float64(m.Total().TableBytesFlushed)/float64(b.N), "flushed-B/op")
}
