package wal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// testdata/unsalted holds a log written in the format without salts
// (segments of MinSegmentSize, no spares): entries 1 to 60, each of 60
// bytes of its own index, term 1 up to 30 and 2 after; a HardState after
// every fifth entry (the last: term 2, vote 1, commit 58); compacted to
// 10 after entry 20; closed cleanly, so its last segment has no end
// record.
// It returns the highest segment number it holds.
func unsaltedFixture(t *testing.T) (vfs.FS, model, uint64) {
	t.Helper()
	fs := vfs.NewMem()
	must(t, fs.MkdirAll("/wal", 0o755))
	names, err := filepath.Glob("testdata/unsalted/*.wal")
	must(t, err)
	if len(names) < 2 {
		t.Fatalf("fixture has %d segments, want at least 2", len(names))
	}
	var last uint64
	for _, name := range names {
		seq, _, ok := parseName(filepath.Base(name))
		if !ok {
			t.Fatalf("fixture file %s", name)
		}
		last = max(last, seq)
		b, err := os.ReadFile(name)
		must(t, err)
		f, err := fs.Create(fs.PathJoin("/wal", filepath.Base(name)), vfs.WriteCategoryUnspecified)
		must(t, err)
		_, err = f.Write(b)
		must(t, err)
		must(t, f.Close())
	}
	want := newModel()
	want.hs = &pb.HardState{Term: proto.Uint64(2), Vote: proto.Uint64(1), Commit: proto.Uint64(58)}
	for i := uint64(1); i <= 60; i++ {
		want.append([]*pb.Entry{{Index: proto.Uint64(i), Term: proto.Uint64(1 + i/31), Data: bytes.Repeat([]byte{byte(i)}, 60)}})
	}
	want.compact(10)
	return fs, want, last
}

// TestUnsaltedSegmentsOpenAndGoOn opens a log in the format without
// salts: it replays exactly, goes on in a new salted segment (never in an
// unsalted one, whose leftovers a client could have forged), and once a
// compaction frees the old segments no unsalted one is left.
func TestUnsaltedSegmentsOpenAndGoOn(t *testing.T) {
	const saltValue = 0x5a175a17
	fs, want, fixtureLast := unsaltedFixture(t)
	cfg := memConfig(fs, MinSegmentSize)
	cfg.Knobs.SaltSource = fixedSalt(saltValue)

	l, r := mustOpen(t, cfg)
	if d := want.diff(fromRecovered(r)); d != "" {
		t.Fatalf("replay of the unsalted log: %s", d)
	}
	checkLog(t, l, want)
	for _, s := range l.segs[:len(l.segs)-1] {
		if s.salt != unsalted {
			t.Fatalf("fixture segment %d read with a salt", s.seq)
		}
	}
	if s := l.active(); s.seq <= fixtureLast || s.salt != fixedSalt(saltValue).salt() {
		t.Fatalf("goes on in segment %d (salt %x); want a new salted segment after %d", s.seq, s.salt.value, fixtureLast)
	}

	more := ents(61, 2, 10, 'x')
	must(t, l.Append(more))
	must(t, l.Close())
	want.append(more)
	l, r = mustOpen(t, cfg)
	if d := want.diff(fromRecovered(r)); d != "" {
		t.Fatalf("replay after appending: %s", d)
	}

	must(t, l.Compact(65))
	want.compact(65)
	for _, s := range l.segs {
		if s.salt == unsalted {
			t.Fatalf("segment %d is still unsalted after compacting past the fixture", s.seq)
		}
	}
	must(t, l.Close())
	l, r = mustOpen(t, cfg)
	defer l.Close()
	if d := want.diff(fromRecovered(r)); d != "" {
		t.Fatalf("replay after compacting: %s", d)
	}
	checkLog(t, l, want)
}
