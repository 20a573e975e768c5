package table

import (
	"fmt"
	"testing"
	"time"
)

var sinkInt int

func BenchmarkHash(b *testing.B) {
	key := []byte("user:0000000042")
	for b.Loop() {
		sinkInt += int(Hash(key))
	}
}

func BenchmarkScanBucket(b *testing.B) {
	var bucket [BucketSize]byte
	for i := range SlotsPerBucket {
		w := Slot{Offset: 4096 * uint64(i+1), Len: 64, FP: uint16(i%3 + 1)}.Word()
		for j := range 8 {
			bucket[i*8+j] = byte(w >> (8 * j))
		}
	}
	var out [SlotsPerBucket]Slot
	b.ReportAllocs()
	for b.Loop() {
		sinkInt += ScanBucket(bucket[:], 2, &out)
	}
}

var valueSizes = []int{16, 1 << 10, 64 << 10}

func BenchmarkEncodeRecord(b *testing.B) {
	for _, n := range valueSizes {
		b.Run(fmt.Sprintf("value=%d", n), func(b *testing.B) {
			key, value := []byte("user:0000000042"), pattern(n, 1)
			rec := make([]byte, RecordLen(len(key), n))
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				encodeRecord(rec, key, value, mv(7))
			}
		})
	}
}

func BenchmarkVerifyRecord(b *testing.B) {
	for _, n := range valueSizes {
		b.Run(fmt.Sprintf("value=%d", n), func(b *testing.B) {
			key := []byte("user:0000000042")
			rec, s := makeRecord(key, pattern(n, 1), 7, 4096)
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				v, _, err := VerifyRecord(rec, key, s)
				if err != nil {
					b.Fatal(err)
				}
				sinkInt += len(v)
			}
		})
	}
}

// BenchmarkLookup is a client's whole CPU path for a hit, on bytes already
// READ: parse the header, pick buckets, scan them, verify the record.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{16, 1 << 10} {
		b.Run(fmt.Sprintf("value=%d", n), func(b *testing.B) {
			tab, mem, _ := newTable(b, 8<<20, Config{})
			keys := make([][]byte, 1000)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("user:%010d", i))
				if err := tab.Put(keys[i], pattern(n, byte(i)), mv(uint64(i))); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				v, _, err := lookup(mem, keys[i%len(keys)])
				if err != nil {
					b.Fatal(err)
				}
				sinkInt += len(v)
				i++
			}
		})
	}
}

// BenchmarkPut overwrites existing keys, so every op also retires a record
// to limbo and, once the grace period has passed, recycles one; with
// InlineMax, the small values are written inline (tagged, into arenas).
func BenchmarkPut(b *testing.B) {
	for _, c := range []struct {
		n, inlineMax int
	}{{16, 0}, {1 << 10, 0}, {16, 144}, {100, 144}} {
		b.Run(fmt.Sprintf("value=%d/inline=%d", c.n, c.inlineMax), func(b *testing.B) {
			n := c.n
			cfg := Config{Grace: time.Millisecond, InlineMax: c.inlineMax}
			tab, _, clk := newTable(b, 64<<20, cfg)
			keys := make([][]byte, 1000)
			value := pattern(n, 1)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("user:%010d", i))
				if err := tab.Put(keys[i], value, mv(0)); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				clk.Advance(time.Microsecond)
				if err := tab.Put(keys[i%len(keys)], value, mv(uint64(i))); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func BenchmarkGet(b *testing.B) {
	tab, _, _ := newTable(b, 8<<20, Config{})
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("user:%010d", i))
		if err := tab.Put(keys[i], pattern(100, byte(i)), mv(uint64(i))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		v, _, _, _ := tab.Get(keys[i%len(keys)])
		sinkInt += len(v)
		i++
	}
}
