package wal

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// writeBatches writes n batches of per entries, each followed by a Sync,
// and returns the closed log's file system and where each entry lies.
func writeBatches(t *testing.T, segSize int64, n, per int) (vfs.FS, []loc) {
	t.Helper()
	fs := vfs.NewMem()
	l, _ := mustOpen(t, memConfig(fs, segSize))
	for b := range n {
		must(t, l.Append(ents(uint64(b*per+1), 1, per, byte(b))))
		must(t, l.Sync())
	}
	locs := append([]loc(nil), l.ents...)
	must(t, l.Close())
	return fs, locs
}

func patch(t *testing.T, fs vfs.FS, seq uint64, off int64, b []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(fs.PathJoin("/wal", segName(seq)), vfs.WriteCategoryUnspecified)
	must(t, err)
	_, err = f.WriteAt(b, off)
	must(t, err)
	must(t, f.Close())
}

// TestDamageIsTornTailOrCorruption checks how Open judges damage: a bad
// record that only unsynced writes can explain ends the log; one that a
// later synced generation proves was synced, or one in a segment that is
// not the last, is ErrCorrupt.
func TestDamageIsTornTailOrCorruption(t *testing.T) {
	const batches, per = 20, 4
	cases := []struct {
		name    string
		segSize int64
		damage  func(t *testing.T, fs vfs.FS, locs []loc)
		// wantLast is the last index replayed; 0 means Open must fail with ErrCorrupt.
		wantLast uint64
	}{
		{"last record torn", 64 << 10, func(t *testing.T, fs vfs.FS, locs []loc) {
			lc := locs[len(locs)-1]
			patch(t, fs, lc.seq, lc.off+int64(lc.size)/2, make([]byte, lc.size/2))
		}, batches*per - 1},
		{"record of the last generation flipped: cannot be told from a torn write", 64 << 10, func(t *testing.T, fs vfs.FS, locs []loc) {
			lc := locs[len(locs)-3]
			patch(t, fs, lc.seq, lc.off+hdrSize+5, []byte{0xff})
		}, batches*per - 3},
		{"record followed by two later generations flipped", 64 << 10, func(t *testing.T, fs vfs.FS, locs []loc) {
			lc := locs[len(locs)-3*per]
			patch(t, fs, lc.seq, lc.off+hdrSize+5, []byte{0xff})
		}, 0},
		{"length of an early record changed", 64 << 10, func(t *testing.T, fs vfs.FS, locs []loc) {
			lc := locs[2]
			patch(t, fs, lc.seq, lc.off+4, []byte{0x10})
		}, 0},
		{"record in a segment before the last flipped", MinSegmentSize, func(t *testing.T, fs vfs.FS, locs []loc) {
			lc := locs[1]
			if lc.seq == locs[len(locs)-1].seq {
				t.Fatal("test needs entries in more than one segment")
			}
			patch(t, fs, lc.seq, lc.off+hdrSize+1, []byte{0xff})
		}, 0},
		{"segment header damaged", MinSegmentSize, func(t *testing.T, fs vfs.FS, locs []loc) {
			patch(t, fs, locs[0].seq, 20, []byte{0xff})
		}, 0},
		{"segment in the middle missing", MinSegmentSize, func(t *testing.T, fs vfs.FS, locs []loc) {
			mid := locs[len(locs)/2].seq
			if mid == locs[0].seq || mid == locs[len(locs)-1].seq {
				t.Fatal("test needs at least three segments")
			}
			must(t, fs.Remove(fs.PathJoin("/wal", segName(mid))))
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs, locs := writeBatches(t, tc.segSize, batches, per)
			tc.damage(t, fs, locs)
			l := openReplaying(t, memConfig(fs, tc.segSize), tc.wantLast)
			if l == nil {
				return
			}
			defer l.Close()
			// The log goes on after the tail it cut.
			must(t, l.Append(ents(tc.wantLast+1, 2, 3, 9)))
			must(t, l.Close())
			l, r := mustOpen(t, memConfig(fs, tc.segSize))
			defer l.Close()
			if got := r.Index + uint64(len(r.Entries)); got != tc.wantLast+3 {
				t.Fatalf("after appending past the cut: replayed up to %d, want %d", got, tc.wantLast+3)
			}
		})
	}
}

// forceRoll starts a new segment now.
func forceRoll(t *testing.T, l *Log) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	must(t, l.roll())
}

// TestMissingSegmentIsNoticedWithoutAGap removes a middle segment whose
// loss leaves no gap in the entries: it held a compaction and the entries
// that replaced an older suffix. Replaying around it would serve the
// replaced entries; the segment chain makes it ErrCorrupt.
func TestMissingSegmentIsNoticedWithoutAGap(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs, MinSegmentSize)
	l, _ := mustOpen(t, cfg)
	must(t, l.Append(ents(1, 1, 20, 0)))
	forceRoll(t, l)
	mid := l.active().seq
	must(t, l.Compact(10))
	must(t, l.Append(ents(11, 2, 5, 0)))
	must(t, l.Sync())
	forceRoll(t, l)
	must(t, l.Close())
	must(t, fs.Remove(fs.PathJoin("/wal", segName(mid))))
	if _, _, err := Open(cfg); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open without segment %d: %v, want ErrCorrupt", mid, err)
	}
}

// TestCompactFreesSegmentsDurably checks that the segments a compaction
// frees are gone for good once it returns: a crash right after it does not
// bring their names back.
func TestCompactFreesSegmentsDurably(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l, _ := mustOpen(t, memConfig(fs, MinSegmentSize))
	defer l.Close()
	must(t, l.Append(ents(1, 1, 100, 0)))
	must(t, l.Compact(100))
	live, _ := segmentFiles(t, fs)
	crashed, _ := segmentFiles(t, fs.CrashClone(vfs.CrashCloneCfg{}))
	if live != 1 || crashed != live {
		t.Fatalf("%d segment files after compacting everything, %d after a crash; want 1 and 1", live, crashed)
	}
}

// TestTornHeaderAfterEndRecordIsTornTail tears the header of a segment
// whose records were written but not synced, right after a segment that
// ended with an end record of a later generation than its last record.
// The new segment's records are then two generations past that last
// record but only one past the end record: unsynced, so a torn tail, not
// corruption.
func TestTornHeaderAfterEndRecordIsTornTail(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs, MinSegmentSize)
	l, _ := mustOpen(t, cfg)
	must(t, l.Append(ents(1, 1, 5, 0)))
	must(t, l.Reset(10, 2)) // synced: the next generation starts
	forceRoll(t, l)         // the end record has that generation, and syncs
	seq := l.active().seq
	must(t, l.Append(ents(11, 2, 3, 0)))
	l.mu.Lock()
	must(t, l.flush()) // written, not synced: then the power fails
	l.mu.Unlock()
	must(t, l.Close()) // (a memory file system: the sync changes nothing)
	patch(t, fs, seq, 0, []byte{0xff})
	l2, r, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l2.Close()
	if r.Index != 10 || len(r.Entries) != 0 {
		t.Fatalf("replayed (%d, %d], want the reset log (10, 10]", r.Index, r.Index+uint64(len(r.Entries)))
	}
}

// TestEntriesChecksWhatItReadsBack damages an entry on disk under an open
// log: reading it back fails with ErrCorrupt instead of serving it.
func TestEntriesChecksWhatItReadsBack(t *testing.T) {
	fs := vfs.NewMem()
	l, _ := mustOpen(t, memConfig(fs, MinSegmentSize))
	defer l.Close()
	must(t, l.Append(ents(1, 1, 10, 0)))
	must(t, l.Sync())
	lc := l.ents[4]
	patch(t, fs, lc.seq, lc.off+hdrSize+3, []byte{0xee})
	if _, err := l.Entries(1, 11, 1<<30); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Entries over a damaged record: %v, want ErrCorrupt", err)
	}
	if got, err := l.Entries(1, 5, 1<<30); err != nil || len(got) != 4 {
		t.Fatalf("Entries before the damaged record: %d entries, %v; want 4", len(got), err)
	}
}

// TestDamagedHeaderOfTheLastSegment damages the header of the last segment
// after records two generations past the previous segment's end record
// were synced in it. The end record names the segment's salt, so those
// records can still be checked, and they prove the header was synced:
// Open fails with ErrCorrupt rather than drop them as a segment never
// written. An end record of the format before it named the next segment
// leaves nothing to check them by: the segment is dropped, as it was.
func TestDamagedHeaderOfTheLastSegment(t *testing.T) {
	for _, tc := range []struct {
		name     string
		oldEnd   bool
		wantLast uint64 // 0: ErrCorrupt
	}{
		{"end record names the segment", false, 0},
		{"end record of the older format: the segment is dropped", true, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			cfg := memConfig(fs, MinSegmentSize)
			l, _ := mustOpen(t, cfg)
			must(t, l.Append(ents(1, 1, 5, 0)))
			must(t, l.Sync())
			prev := *l.active()
			forceRoll(t, l)
			seq := l.active().seq
			for i := range 3 {
				must(t, l.Append(ents(uint64(6+i), 1, 1, 0)))
				must(t, l.Sync())
			}
			must(t, l.Close())
			if tc.oldEnd {
				end := prev.size
				batch := batchAt(t, fs, prev.seq, end)
				patch(t, fs, prev.seq, end, appendRecord(nil, recEnd, prev.seq, batch, prev.salt, nil))
			}
			patch(t, fs, seq, 0, []byte{0xff})
			if l := openReplaying(t, cfg, tc.wantLast); l != nil {
				must(t, l.Close())
			}
		})
	}
}

// openReplaying opens the log in cfg and checks that it replays up to
// wantLast; wantLast 0 means Open must fail with ErrCorrupt, and then it
// returns nil.
func openReplaying(t *testing.T, cfg Config, wantLast uint64) *Log {
	t.Helper()
	l, r, err := Open(cfg)
	if wantLast == 0 {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
		return nil
	}
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got := r.Index + uint64(len(r.Entries)); got != wantLast {
		l.Close()
		t.Fatalf("replayed up to %d, want %d", got, wantLast)
	}
	return l
}

// batchAt is the generation of the record at off in segment seq.
func batchAt(t *testing.T, fs vfs.FS, seq uint64, off int64) uint64 {
	t.Helper()
	f, err := fs.Open(fs.PathJoin("/wal", segName(seq)))
	must(t, err)
	defer f.Close()
	var b [hdrSize]byte
	_, err = f.ReadAt(b[:], off)
	must(t, err)
	return binary.LittleEndian.Uint64(b[16:])
}
