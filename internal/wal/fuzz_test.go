package wal

import (
	"bytes"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// fuzzSalt is the salt of the segments the seeds hold.
var fuzzSalt = newSalt(0x5a17_5a17_5a17_5a17, 0x0123_4567_89ab_cdef)

// fuzzSegment is segment seq as the log writes it: its header, then
// records salted with fuzzSalt.
func fuzzSegment(seq uint64, hs []byte, tail func(b []byte) []byte) []byte {
	b := appendRecord(nil, recSegment, seq, 1, unsalted, appendHeader(nil, indexTerm{}, 0, fuzzSalt, hs))
	return tail(b)
}

// FuzzDecodeRecord feeds the record decoder arbitrary bytes (it reads
// disk): it must not panic, must stay within its input, and anything it
// accepts must be exactly what the encoder writes for that record with
// that salt.
func FuzzDecodeRecord(f *testing.F) {
	e, _ := proto.Marshal(&pb.Entry{Index: proto.Uint64(7), Term: proto.Uint64(2), Data: []byte("value")})
	f.Add(appendRecord(nil, recEntry, 1, 1, fuzzSalt, e), uint64(1), fuzzSalt.value)
	f.Add(appendRecord(nil, recEntry, 1, 1, unsalted, e), uint64(1), uint64(0))
	f.Add(appendRecord(nil, recSegment, 3, 9, unsalted, appendHeader(nil, indexTerm{5, 1}, 2, fuzzSalt, nil)), uint64(3), uint64(0))
	f.Add(appendRecord(nil, recCompact, 1, 4, fuzzSalt, indexTermBytes(10, 3))[:40], uint64(1), fuzzSalt.value)
	f.Add(make([]byte, 64), uint64(1), uint64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, uint64(0), uint64(1))
	f.Fuzz(func(t *testing.T, b []byte, seq, saltValue uint64) {
		s := newSalt(saltValue, saltValue^0x0123_4567_89ab_cdef)
		if saltValue == 0 {
			s = unsalted
		}
		r, n, err := decodeRecord(b, seq, s, MaxRecord)
		if err != nil {
			return
		}
		if n > len(b) || hdrSize+len(r.payload) > n {
			t.Fatalf("decoded size %d (payload %d) beyond input %d", n, len(r.payload), len(b))
		}
		again := appendRecord(nil, r.typ, seq, r.batch, s, r.payload)
		if !bytes.Equal(again[:hdrSize+len(r.payload)], b[:hdrSize+len(r.payload)]) {
			t.Fatalf("accepted bytes the encoder does not write:\n%x\n%x", b[:hdrSize+len(r.payload)], again)
		}
	})
}

// FuzzScanSegment scans arbitrary segment contents as replay does: no
// panic, and the records it keeps lie within the segment, in order, the
// first of them the header and no other.
func FuzzScanSegment(f *testing.F) {
	e, _ := proto.Marshal(&pb.Entry{Index: proto.Uint64(7), Term: proto.Uint64(2), Data: []byte("value")})
	f.Add(fuzzSegment(3, nil, func(b []byte) []byte {
		return appendRecord(appendRecord(b, recEntry, 3, 1, fuzzSalt, e), recEnd, 3, 2, fuzzSalt, nil)
	}), uint64(3))
	f.Add(fuzzSegment(1, nil, func(b []byte) []byte {
		return appendRecord(b, recCompact, 1, 4, fuzzSalt, indexTermBytes(10, 3))[:len(b)+40]
	}), uint64(1))
	legacy := appendRecord(nil, recSegment, 2, 1, unsalted, appendHeader(nil, indexTerm{}, 0, unsalted, nil)[:24])
	f.Add(appendRecord(legacy, recEntry, 2, 1, unsalted, e), uint64(2))
	f.Add(make([]byte, 64), uint64(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, seq uint64) {
		sc := &scanned{seq: seq}
		if err := sc.decode(b); err != nil {
			return
		}
		prev := int64(-1)
		for i, r := range sc.recs {
			if r.off <= prev || r.off+int64(r.size) > int64(len(b)) {
				t.Fatalf("record at %d size %d: out of order or beyond %d bytes", r.off, r.size, len(b))
			}
			if (r.typ == recSegment) != (i == 0) || (i == 0) != (r.off == 0) {
				t.Fatalf("record %d (type %d) at offset %d: only the first record, at 0, is the header", i, r.typ, r.off)
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
	valid := fuzzSegment(1, hs, func(b []byte) []byte { return appendRecord(b, recEntry, 1, 1, fuzzSalt, e) })
	f.Add(valid)
	f.Add(appendRecord(valid, recReset, 1, 2, fuzzSalt, indexTermBytes(1<<62, 3)))
	f.Add(appendRecord(valid, recCompact, 1, 2, fuzzSalt, indexTermBytes(1, 1)))
	f.Add(appendRecord(valid, recReset, 1, 2, fuzzSalt, indexTermBytes(math.MaxUint64, 3)))
	f.Add(valid[:len(valid)-3])
	legacy := appendRecord(nil, recSegment, 1, 1, unsalted, append(appendHeader(nil, indexTerm{}, 0, unsalted, nil)[:24], hs...))
	f.Add(appendRecord(legacy, recEntry, 1, 1, unsalted, e))
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
