package client

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/table"
)

// toLayout2 rewrites mem, a layout 4 region without arenas, as the layout 2
// region of the same geometry and contents, as a server of an earlier
// version would have written it: every record in layout 3's format (an
// 8-byte version, its mod, where layout 4 has the metadata), then
// everything after the header moved down by the difference of the header
// sizes (buckets and records alike), every slot word's record offset and
// length with it, and the header becomes layout 2's. It returns the region,
// that much shorter.
func toLayout2(t *testing.T, mem []byte) []byte {
	t.Helper()
	h, err := table.ParseHeader(mem)
	if err != nil || h.Version != table.LayoutVersion || h.BucketBytes != table.BucketSize {
		t.Fatalf("not a layout 4 region without arenas: %+v, %v", h, err)
	}
	le := binary.LittleEndian
	for pos := uint64(table.HeaderSize); pos < h.RecordBase; pos += table.SlotSize {
		if w := le.Uint64(mem[pos:]); w != 0 {
			s := table.DecodeSlot(w)
			s.Len = table.RewriteAsLayout3(mem[s.Offset:], s.Len)
			le.PutUint64(mem[pos:], s.Word())
		}
	}
	const shift = table.HeaderSize - table.HeaderSize2
	copy(mem[table.HeaderSize2:], mem[table.HeaderSize:h.RecordEnd])
	for pos := uint64(table.HeaderSize2); pos < h.RecordBase-shift; pos += table.SlotSize {
		if w := le.Uint64(mem[pos:]); w != 0 {
			s := table.DecodeSlot(w)
			s.Offset -= shift
			le.PutUint64(mem[pos:], s.Word())
		}
	}
	le.PutUint32(mem[8:], table.LayoutVersion2)
	le.PutUint64(mem[24:], h.RecordBase-shift)
	le.PutUint64(mem[hdrOffRecordEnd:], h.RecordEnd-shift)
	return mem[:h.RecordEnd-shift]
}

// TestReadsLayout2Region: a client reads a region of the previous layout
// (header 64 bytes, buckets from offset 64), which servers not yet
// upgraded still write: hits, cached hits and misses take their usual
// round trips, although its 128-byte header READ takes in bucket 0's slots.
func TestReadsLayout2Region(t *testing.T) {
	r := newRig(t)
	var keys []string
	for i := range 24 { // 8 buckets: bucket 0, read with the header, holds some
		k := fmt.Sprintf("key-%d", i)
		keys = append(keys, k)
		r.put(k, "v-"+k)
	}
	r.lease(time.Hour)
	v2 := toLayout2(t, r.f.mem)
	h, err := table.ParseHeader(v2)
	if err != nil || h.Version != table.LayoutVersion2 {
		t.Fatalf("layout 2 header %+v, %v", h, err)
	}
	if string(v2[table.HeaderSize2:table.HeaderSize]) == string(make([]byte, table.BucketSize)) {
		t.Fatal("bucket 0 is empty: the header READ would not take in any slot")
	}
	r.f.mem, r.f.desc.Len, r.f.hdr = v2, uint64(len(v2)), h
	r.tbl = nil // its writes would land at layout 4's offsets
	r.connect()
	if g := r.node().geo.Load(); g.hdr != h {
		t.Fatalf("client adopted %+v, want %+v", g.hdr, h)
	}
	for _, k := range keys {
		for _, want := range [][]string{traceHit, traceCachedHit} {
			r.f.begin(nil)
			if v := r.get(k, Linearizable); v != "v-"+k {
				t.Fatalf("get %s = %q", k, v)
			}
			if trace, rpcs := r.f.end(); !slices.Equal(trace, want) || len(rpcs) != 0 {
				t.Fatalf("get %s took %v and RPCs %v, want %v", k, trace, rpcs, want)
			}
		}
	}
	r.f.begin(nil)
	if v := r.get("absent", Linearizable); v != answerNotFound {
		t.Fatalf("get absent = %q", v)
	}
	if trace, rpcs := r.f.end(); !slices.Equal(trace, traceMiss) || len(rpcs) != 0 {
		t.Fatalf("miss took %v and RPCs %v, want %v", trace, rpcs, traceMiss)
	}
}
