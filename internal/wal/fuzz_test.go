package wal

import (
	"bytes"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func fuzzSeeds(f *testing.F) {
	e, _ := proto.Marshal(&pb.Entry{Index: proto.Uint64(7), Term: proto.Uint64(2), Data: []byte("value")})
	f.Add(appendRecord(nil, recEntry, 1, 1, e), uint64(1))
	f.Add(appendRecord(appendRecord(nil, recSegment, 3, 9, appendHeader(nil, indexTerm{5, 1}, 2, nil)), recEnd, 3, 9, nil), uint64(3))
	f.Add(appendRecord(nil, recCompact, 1, 4, indexTermBytes(10, 3))[:40], uint64(1))
	f.Add(make([]byte, 64), uint64(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, uint64(0))
}

// FuzzDecodeRecord feeds the record decoder arbitrary bytes (it reads
// disk): it must not panic, must stay within its input, and anything it
// accepts must be exactly what the encoder writes for that record.
func FuzzDecodeRecord(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte, seq uint64) {
		r, n, err := decodeRecord(b, seq, MaxRecord)
		if err != nil {
			return
		}
		if n > len(b) || hdrSize+len(r.payload) > n {
			t.Fatalf("decoded size %d (payload %d) beyond input %d", n, len(r.payload), len(b))
		}
		again := appendRecord(nil, r.typ, seq, r.batch, r.payload)
		if !bytes.Equal(again[:hdrSize+len(r.payload)], b[:hdrSize+len(r.payload)]) {
			t.Fatalf("accepted bytes the encoder does not write:\n%x\n%x", b[:hdrSize+len(r.payload)], again)
		}
	})
}

// FuzzScanSegment scans arbitrary segment contents as replay does: no
// panic, and the records it keeps lie within the segment, in order.
func FuzzScanSegment(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte, seq uint64) {
		sc := &scanned{seq: seq}
		if err := sc.decode(b); err != nil {
			return
		}
		prev := int64(-1)
		for _, r := range sc.recs {
			if r.off <= prev || r.off+int64(r.size) > int64(len(b)) {
				t.Fatalf("record at %d size %d: out of order or beyond %d bytes", r.off, r.size, len(b))
			}
			prev = r.off
		}
		if sc.end > int64(len(b)) {
			t.Fatalf("end %d beyond %d bytes", sc.end, len(b))
		}
	})
}

// FuzzOpen opens a log whose only segment holds arbitrary bytes: Open
// must return an error or a log, never panic, and a log it returns must
// serve what it replayed.
func FuzzOpen(f *testing.F) {
	e, _ := proto.Marshal(&pb.Entry{Index: proto.Uint64(1), Term: proto.Uint64(1), Data: []byte("v")})
	hs, _ := proto.Marshal(&pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(1)})
	valid := appendRecord(nil, recSegment, 1, 1, appendHeader(nil, indexTerm{}, 0, hs))
	valid = appendRecord(valid, recEntry, 1, 1, e)
	f.Add(valid)
	f.Add(appendRecord(valid, recReset, 1, 2, indexTermBytes(1<<62, 3)))
	f.Add(appendRecord(valid, recCompact, 1, 2, indexTermBytes(1, 1)))
	f.Add(appendRecord(valid, recReset, 1, 2, indexTermBytes(math.MaxUint64, 3)))
	f.Add(valid[:len(valid)-3])
	f.Fuzz(func(t *testing.T, seg []byte) {
		fs := vfs.NewMem()
		must(t, fs.MkdirAll("/wal", 0o755))
		w, err := fs.Create("/wal/"+segName(1), vfs.WriteCategoryUnspecified)
		must(t, err)
		_, err = w.Write(seg)
		must(t, err)
		must(t, w.Close())
		l, r, err := Open(memConfig(fs, MinSegmentSize))
		if err != nil {
			return
		}
		defer l.Close()
		checkLog(t, l, fromRecovered(r))
	})
}
