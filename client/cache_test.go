package client

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/table"
)

// recordImage is the bytes the writer would write as a live out-of-place
// record of key (docs/layout.md, "Records"): anything a value may hold.
func recordImage(key, value string, version uint64) []byte {
	b := make([]byte, table.RecordLen(len(key), len(value)))
	le := binary.LittleEndian
	le.PutUint64(b[8:], version)
	le.PutUint16(b[16:], uint16(len(key)))
	le.PutUint32(b[18:], uint32(len(value)))
	copy(b[24:], key)
	copy(b[24+len(key):], value)
	le.PutUint32(b[0:], crc32.Checksum(b[8:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestCachedOffsetHoldsARecordImage: a client caches k's out-of-place
// location; k is deleted (or updated elsewhere); once the grace period is
// over, another key's value, holding the image of a live record of k (crc
// and all), is written where k's record was. A cached GET that READ the
// bytes at the cached offset alone took them for k's record: a deleted
// key came back, and a live one with a value never written to it. Bytes
// are trusted only once a slot read before them names them.
func TestCachedOffsetHoldsARecordImage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *rig)
		want   string
	}{
		{"deleted", func(r *rig) {
			if _, err := r.tbl.Delete([]byte("k")); err != nil {
				r.t.Fatal(err)
			}
		}, answerNotFound},
		{"updated", func(r *rig) { r.put("k", "v2") }, "v2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.put("a", "1234567") // a 32-byte record at the front of the record area
			r.put("k", "v1")      // and k's right after it
			r.lease(time.Hour)
			r.connect()
			r.warm("k")
			loc, _ := r.node().cache.get([]byte("k"))
			tc.change(r)
			if _, err := r.tbl.Delete([]byte("a")); err != nil {
				t.Fatal(err)
			}
			r.tclock.Add(int64(2 * time.Minute)) // past the grace period: the space may be reused
			// j's record takes a's place: 24 bytes of header and 1 of key,
			// then 7 of value reach k's old offset, where the image starts.
			img := recordImage("k", "forged", 99)
			r.put("j", "pppppph"+string(img))
			if off := table.DecodeSlot(loc.word).Offset; !bytes.Equal(r.f.mem[off:off+uint64(len(img))], img) {
				t.Fatalf("the image is not at k's cached offset %d: the test proves nothing", off)
			}
			r.lease(time.Hour)
			if got := r.get("k", Linearizable); got != tc.want {
				t.Fatalf("get k = %q, want %q", got, tc.want)
			}
		})
	}
}
