package wal

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// step acts on the log and on the model alike.
type step func(t *testing.T, l *Log, m *model)

func appendStep(first, term uint64, n int) step {
	return func(t *testing.T, l *Log, m *model) {
		es := ents(first, term, n, byte(term))
		must(t, l.Append(es))
		m.append(es)
	}
}

func syncStep(t *testing.T, l *Log, _ *model) { must(t, l.Sync()) }

func hsStep(term, vote, commit uint64) step {
	return func(t *testing.T, l *Log, m *model) {
		hs := &pb.HardState{Term: proto.Uint64(term), Vote: proto.Uint64(vote), Commit: proto.Uint64(commit)}
		must(t, l.SetHardState(hs))
		m.hs = hs
	}
}

func compactStep(index uint64) step {
	return func(t *testing.T, l *Log, m *model) {
		must(t, l.Compact(index))
		m.compact(index)
	}
}

func resetStep(index, term uint64) step {
	return func(t *testing.T, l *Log, m *model) {
		must(t, l.Reset(index, term))
		m.reset(index, term)
	}
}

func segmentFiles(t *testing.T, fs vfs.FS) (segs, spares int) {
	names, err := fs.List("/wal")
	must(t, err)
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, segSuffix):
			segs++
		case strings.HasSuffix(n, spareSuffix):
			spares++
		}
	}
	return segs, spares
}

// TestLogServesAndReplaysWhatWasWritten runs each case's steps, checks the
// open log serves the model, then reopens it and checks the replay.
func TestLogServesAndReplaysWhatWasWritten(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
		// after reopening: at most this many segment files (0: no check)
		maxSegs int
	}{
		{name: "append", steps: []step{appendStep(1, 1, 10), syncStep}},
		{name: "empty log", steps: nil},
		{name: "overwrite suffix after leader change", steps: []step{
			appendStep(1, 1, 10), syncStep, appendStep(6, 2, 3), syncStep}},
		{name: "overwrite suffix without a sync between", steps: []step{
			appendStep(1, 1, 10), appendStep(4, 2, 2), appendStep(6, 3, 4), syncStep}},
		{name: "overwrite across segments", steps: []step{
			appendStep(1, 1, 120), syncStep, appendStep(5, 2, 3), syncStep}},
		{name: "hard state", steps: []step{
			hsStep(1, 1, 0), appendStep(1, 1, 3), hsStep(1, 1, 3), syncStep}},
		{name: "compact keeps the suffix", steps: []step{
			appendStep(1, 1, 20), compactStep(7), appendStep(21, 1, 2), syncStep}},
		{name: "compact frees whole segments", steps: []step{
			appendStep(1, 1, 300), syncStep, compactStep(290)}, maxSegs: 3},
		{name: "compact everything", steps: []step{
			appendStep(1, 1, 300), compactStep(300)}, maxSegs: 2},
		{name: "hard state survives freeing its segment", steps: []step{
			hsStep(3, 2, 1), appendStep(1, 3, 300), compactStep(300), appendStep(301, 3, 1), syncStep}, maxSegs: 3},
		{name: "recycled segments' stale records are not read", steps: []step{
			appendStep(1, 1, 300), compactStep(300), appendStep(301, 2, 300), compactStep(590),
			appendStep(601, 3, 100), appendStep(595, 4, 10), syncStep}},
		{name: "reset drops every entry", steps: []step{
			appendStep(1, 1, 50), syncStep, resetStep(40, 2), appendStep(41, 2, 5), syncStep}},
		{name: "reset ahead of the log", steps: []step{
			appendStep(1, 1, 50), resetStep(500, 4), appendStep(501, 4, 3), syncStep}, maxSegs: 2},
		{name: "reset then compact", steps: []step{
			appendStep(1, 1, 200), resetStep(150, 3), appendStep(151, 3, 200), compactStep(300), syncStep}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			cfg := memConfig(fs, 8<<10)
			l, _ := mustOpen(t, cfg)
			m := newModel()
			for _, s := range tc.steps {
				s(t, l, &m)
			}
			checkLog(t, l, m)
			must(t, l.Close())
			l, r := mustOpen(t, cfg)
			defer l.Close()
			if d := m.diff(fromRecovered(r)); d != "" {
				t.Fatalf("replay: %s", d)
			}
			checkLog(t, l, m)
			if segs, _ := segmentFiles(t, fs); tc.maxSegs > 0 && segs > tc.maxSegs {
				t.Fatalf("%d segment files after reopening, want at most %d", segs, tc.maxSegs)
			}
		})
	}
}

// TestFreedSegmentsAreRecycled checks that a compaction turns freed
// segments into spares and that rolling renames one into the new segment
// instead of writing a new file.
func TestFreedSegmentsAreRecycled(t *testing.T) {
	fs := vfs.NewMem()
	l, _ := mustOpen(t, memConfig(fs, 8<<10))
	defer l.Close()
	m := newModel()
	appendStep(1, 1, 300)(t, l, &m)
	compactStep(300)(t, l, &m)
	l.mu.Lock()
	l.collectSpare()
	freed := append([]uint64(nil), l.spares...)
	active := l.active().seq
	l.mu.Unlock()
	if len(freed) < DefaultSpareSegments {
		t.Fatalf("%d spares after compaction, want at least %d", len(freed), DefaultSpareSegments)
	}
	for l.LastIndex() < 400 && l.active().seq == active {
		appendStep(l.LastIndex()+1, 1, 1)(t, l, &m)
	}
	must(t, l.Sync())
	var left int
	for _, seq := range freed {
		if _, err := fs.Stat(fs.PathJoin("/wal", spareName(seq))); err == nil {
			left++
		}
	}
	if left != len(freed)-1 {
		t.Fatalf("%d of %d spares left after one roll, want one renamed into the new segment", left, len(freed))
	}
	checkLog(t, l, m)
}

// TestRollingDoesNotWaitForZeroFill checks that with no spare left a
// spare is prepared in the background, and used by the next roll.
func TestRollingDoesNotWaitForZeroFill(t *testing.T) {
	fs := vfs.NewMem()
	l, _ := mustOpen(t, memConfig(fs, 8<<10))
	defer l.Close()
	l.mu.Lock()
	prepared := l.prep != nil
	l.collectSpare()
	spares := append([]uint64(nil), l.spares...)
	l.mu.Unlock()
	if !prepared || len(spares) != 1 {
		t.Fatalf("a new log prepared a spare: %v, spares %v; want one", prepared, spares)
	}
	m := newModel()
	appendStep(1, 1, 100)(t, l, &m)
	must(t, l.Sync())
	if _, err := fs.Stat(fs.PathJoin("/wal", spareName(spares[0]))); err == nil {
		t.Fatalf("spare %d still there after rolling", spares[0])
	}
	checkLog(t, l, m)
}

// TestBadCallsAreRefused checks the errors of calls the log cannot honour.
func TestBadCallsAreRefused(t *testing.T) {
	cases := []struct {
		name string
		call func(l *Log) error
		want error
	}{
		{"append with a gap", func(l *Log) error { return l.Append(ents(12, 1, 1, 0)) }, ErrBadAppend},
		{"append at or below the truncation point", func(l *Log) error { return l.Append(ents(3, 1, 1, 0)) }, ErrBadAppend},
		{"append not contiguous", func(l *Log) error {
			es := append(ents(11, 1, 1, 0), ents(13, 1, 1, 0)...)
			return l.Append(es)
		}, ErrBadAppend},
		{"entry larger than a record", func(l *Log) error {
			return l.Append([]*pb.Entry{{Index: proto.Uint64(11), Term: proto.Uint64(1), Data: make([]byte, 8<<10)}})
		}, ErrTooLarge},
		{"compact beyond the last index", func(l *Log) error { return l.Compact(11) }, ErrBadAppend},
		{"reset below the truncation point", func(l *Log) error { return l.Reset(4, 1) }, ErrBadAppend},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := mustOpen(t, memConfig(vfs.NewMem(), 8<<10))
			defer l.Close()
			must(t, l.Append(ents(1, 1, 10, 0)))
			must(t, l.Compact(5))
			if err := tc.call(l); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			// The refused call changed nothing.
			if l.FirstIndex() != 6 || l.LastIndex() != 10 {
				t.Fatalf("log is (%d, %d] after a refused call, want (5, 10]", l.FirstIndex()-1, l.LastIndex())
			}
		})
	}
}

// TestEntriesHonoursMaxSize checks raft.Storage's size rule: at least one
// entry, then no more than maxSize bytes.
func TestEntriesHonoursMaxSize(t *testing.T) {
	l, _ := mustOpen(t, memConfig(vfs.NewMem(), 8<<10))
	defer l.Close()
	must(t, l.Append(ents(1, 1, 10, 0)))
	one := uint64(proto.Size(ents(1, 1, 1, 0)[0]))
	for _, tc := range []struct{ max, want uint64 }{{0, 1}, {one, 1}, {2*one + 1, 2}, {1 << 30, 10}} {
		got, err := l.Entries(1, 11, tc.max)
		if err != nil || uint64(len(got)) != tc.want {
			t.Fatalf("Entries(max %d): %d entries, %v; want %d", tc.max, len(got), err, tc.want)
		}
	}
}
