package wal

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"
)

// TestStatsCountWhatTheLogDid: each operation shows in Stats as what it
// did to the files: entries appended, bytes written, syncs (and their
// histogram), rolls, compactions, resets, and the segments and spares the
// log holds.
func TestStatsCountWhatTheLogDid(t *testing.T) {
	l, _ := mustOpen(t, memConfig(vfs.NewMem(), 8<<10))
	defer l.Close()
	m := newModel()
	st := l.Stats()
	if st.Syncs != 1 || st.Segments != 1 || st.SegmentSize != 8<<10 || st.FirstIndex != 1 || st.LastIndex != 0 {
		t.Fatalf("after Open: %+v, want one sync (the new segment), one segment, no entries", st)
	}
	tests := []struct {
		name string
		do   func()
		want func(before, after Stats) bool
	}{
		{"append buffers", func() { appendStep(1, 1, 3)(t, l, &m) }, func(b, a Stats) bool {
			return a.Entries == b.Entries+3 && a.BytesWritten == b.BytesWritten && a.Syncs == b.Syncs && a.LastIndex == 3
		}},
		{"sync writes and syncs once", func() { syncStep(t, l, &m) }, func(b, a Stats) bool {
			rec := uint64(recordSize(proto.Size(ents(1, 1, 1, 1)[0])))
			return a.Syncs == b.Syncs+1 && a.BytesWritten >= b.BytesWritten+3*rec && a.SyncCounts[len(SyncBuckets)-1] == a.Syncs
		}},
		{"rolls", func() { appendStep(4, 1, 200)(t, l, &m); syncStep(t, l, &m) }, func(b, a Stats) bool {
			return a.Rolls > b.Rolls && a.Segments > b.Segments && a.Syncs >= b.Syncs+a.Rolls-b.Rolls+1 && a.LastIndex == 203
		}},
		{"compaction frees segments", func() { compactStep(200)(t, l, &m) }, func(b, a Stats) bool {
			return a.Compactions == b.Compactions+1 && a.Segments < b.Segments && a.Spares > 0 && a.FirstIndex == 201
		}},
		{"reset", func() { resetStep(500, 2)(t, l, &m) }, func(b, a Stats) bool {
			return a.Resets == b.Resets+1 && a.Segments == 1 && a.FirstIndex == 501 && a.LastIndex == 500
		}},
	}
	for _, tc := range tests {
		before := l.Stats()
		tc.do()
		if after := l.Stats(); !tc.want(before, after) {
			t.Errorf("%s: stats went from %+v to %+v", tc.name, before, after)
		}
	}
	checkLog(t, l, m)
}

// TestObserveSyncBuckets: a sync lands in the first bucket whose bound it
// does not exceed, and one beyond every bound only in the count.
func TestObserveSyncBuckets(t *testing.T) {
	l := &Log{}
	for _, d := range []float64{50e-6, 100e-6, 150e-6, 10} {
		l.stats.observeSync(secondsDuration(d))
	}
	st := l.Stats()
	want := map[int]uint64{0: 2, 1: 3, len(SyncBuckets) - 1: 3}
	for i, n := range want {
		if st.SyncCounts[i] != n {
			t.Errorf("bucket %d (le %g): %d, want %d", i, SyncBuckets[i], st.SyncCounts[i], n)
		}
	}
	if st.Syncs != 4 || st.SyncSeconds < 10 {
		t.Errorf("syncs %d taking %gs, want 4 taking over 10s", st.Syncs, st.SyncSeconds)
	}
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
