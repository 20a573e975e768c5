package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/revision"
)

// The history benchmarks write keys of 16 bytes ("key-%012d") and values
// of 256 bytes, the 64-instance PUT shape's values.
const (
	benchKeys     = 10000
	benchValueLen = 256
)

// fillValue makes v incompressible and unlike every other value, as
// most values are to Pebble's snappy (a value repeated compresses away).
func fillValue(v []byte) {
	for i := 0; i+8 <= len(v); i += 8 {
		binary.LittleEndian.PutUint64(v[i:], rand.Uint64())
	}
}

func benchKey(i int) []byte { return fmt.Appendf(nil, "key-%012d", i%benchKeys) }

// benchHistory writes revs revisions of one write each, round robin over
// benchKeys keys, from revision from+1, in Updates of batch revisions.
func benchHistory(tb testing.TB, s *Store, from uint64, revs, batch, valueLen int) uint64 {
	value := make([]byte, valueLen)
	rev := from
	for done := 0; done < revs; {
		u := s.NewUpdate()
		for j := 0; j < batch && done < revs; j, done = j+1, done+1 {
			rev++
			fillValue(value)
			m := revision.Meta{Create: 1, Mod: rev, Version: rev}
			if err := u.RecordHistory(benchKey(int(rev)), value, m, false); err != nil {
				tb.Fatal(err)
			}
		}
		if err := u.SetRevision(rev); err != nil {
			tb.Fatal(err)
		}
		if err := u.Commit(false); err != nil {
			tb.Fatal(err)
		}
	}
	return rev
}

// BenchmarkHistoryBytesPerRevision reports the bytes on disk the history
// takes per key per revision (both of its records, after Pebble compacted
// them into tables), for 16-byte keys and values of 16 and 256 bytes:
// bytes/rev, and overhead/rev, the part beyond the key and value
// themselves.
func BenchmarkHistoryBytesPerRevision(b *testing.B) {
	for _, valueLen := range []int{16, benchValueLen} {
		b.Run(fmt.Sprintf("value=%d", valueLen), func(b *testing.B) {
			for range b.N {
				benchHistoryBytes(b, valueLen)
			}
		})
	}
}

func benchHistoryBytes(b *testing.B, valueLen int) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const revs = 100000
	benchHistory(b, s, 0, revs, 100, valueLen)
	if err := s.db.Compact(context.Background(), revStart, revEnd, true); err != nil {
		b.Fatal(err)
	}
	size, err := s.db.EstimateDiskUsage(revStart, revEnd)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(size)/revs, "bytes/rev")
	b.ReportMetric(float64(size)/revs-16-float64(valueLen), "overhead/rev")
}

// BenchmarkCompactionThroughput reports how many history records the
// physical compaction deletes per second (records/s), each record a write
// that a later write of its key superseded (10 per key).
func BenchmarkCompactionThroughput(b *testing.B) {
	for range b.N {
		s, err := Open(b.TempDir(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		s.rs.comp.close() // the benchmark runs the batches itself
		s.rs.comp = nil
		const revs = 10 * benchKeys
		rev := benchHistory(b, s, 0, revs, 100, benchValueLen)
		u := s.NewUpdate()
		if err := u.Compact(rev); err != nil {
			b.Fatal(err)
		}
		if err := u.Commit(false); err != nil {
			b.Fatal(err)
		}
		c := &compactor{s: s}
		start := time.Now()
		if err := c.drain(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(revs-benchKeys)/time.Since(start).Seconds(), "records/s")
		s.Close()
	}
}

// BenchmarkUpdateCommit compares the cost of an Update of 8 PUTs (one
// revision each) as Update.Put writes them (the history record, which is
// the state), with compactions (every 1000 revisions, to 500 behind)
// running beside, and as the build before revisions wrote them (the
// key's state record alone): ns/op is per PUT.
func BenchmarkUpdateCommit(b *testing.B) {
	for _, mode := range []string{"state-only", "put", "put+compaction"} {
		b.Run(mode, func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			value := make([]byte, benchValueLen)
			var rev uint64
			var kb, vb []byte
			b.ResetTimer()
			for i := 0; i < b.N; {
				u := s.NewUpdate()
				for j := 0; j < 8 && i < b.N; j, i = j+1, i+1 {
					rev++
					fillValue(value)
					key := benchKey(int(rev))
					m := revision.Meta{Create: 1, Mod: rev, Version: rev}
					if mode == "state-only" {
						kb = appendKVKey(kb[:0], u.gen, key)
						vb = append(m.Append(vb[:0]), value...)
						err = u.b.Set(kb, vb, nil)
					} else {
						err = u.Put(key, value, m)
					}
					if err != nil {
						b.Fatal(err)
					}
					if mode == "put+compaction" && rev%1000 == 0 {
						if err := u.Compact(rev - 500); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := u.SetRevision(rev); err != nil {
					b.Fatal(err)
				}
				if err := u.Commit(false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyPut is the store's part of applying PUTs as the state
// machine does: each looks up its key's Meta (Update.Meta), then writes
// the key and its history (Update.Put) and moves the store revision, 8 to
// an Update, which commits with the applied index. keys is the key space
// (round robin), or (cold) every PUT a new key. With leases, some lease exists, so that every plain PUT
// also detaches its key from whatever lease it had (Update.Detach), as
// the state machine's do. ns/op and allocs/op are per PUT.
func BenchmarkApplyPut(b *testing.B) {
	for _, bc := range []struct {
		keys   int
		leases bool
	}{{benchKeys, false}, {benchKeys, true}, {0, false}} {
		name := fmt.Sprintf("keys=%d", bc.keys)
		if bc.keys == 0 {
			name = "keys=cold"
		}
		if bc.leases {
			name += ",leases"
		}
		keys := bc.keys
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			value := make([]byte, benchValueLen)
			fillValue(value)
			key := make([]byte, 0, 16)
			var rev uint64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; {
				u := s.NewUpdate()
				for j := 0; j < 8 && i < b.N; j, i = j+1, i+1 {
					rev++
					n := rev
					if keys > 0 {
						n %= uint64(keys)
					}
					key = appendBenchKey(key[:0], n)
					prev, err := u.Meta(key)
					if err != nil {
						b.Fatal(err)
					}
					if err := errors.Join(u.Put(key, value, prev.Next(rev, 0)), u.SetRevision(rev)); err != nil {
						b.Fatal(err)
					}
					if bc.leases {
						if _, err := u.Detach(key); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := u.SetApplied(rev); err != nil {
					b.Fatal(err)
				}
				if err := u.Commit(false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// appendBenchKey appends benchKey's key for n without allocating.
func appendBenchKey(dst []byte, n uint64) []byte {
	dst = append(dst, "key-000000000000"...)
	for i := len(dst) - 1; n > 0; i, n = i-1, n/10 {
		dst[i] = byte('0' + n%10)
	}
	return dst
}
