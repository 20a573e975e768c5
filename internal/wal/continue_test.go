package wal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestRestartLoopTakesNoNewSegment restarts a log many times with one
// entry written between restarts: the segment files it leaves depend on
// the bytes written, not on the number of restarts.
func TestRestartLoopTakesNoNewSegment(t *testing.T) {
	for _, restarts := range []int{1, 10, 100} {
		t.Run(fmt.Sprint(restarts, "restarts"), func(t *testing.T) {
			fs := vfs.NewMem()
			cfg := memConfig(fs, 256<<10)
			want := newModel()
			for i := range restarts {
				l, r := mustOpen(t, cfg)
				if d := want.diff(fromRecovered(r)); d != "" {
					t.Fatalf("restart %d: replay: %s", i, d)
				}
				es := ents(uint64(i+1), 1, 1, byte(i))
				must(t, l.Append(es))
				must(t, l.Sync())
				must(t, l.Close())
				want.append(es)
			}
			l, r := mustOpen(t, cfg)
			defer l.Close()
			if d := want.diff(fromRecovered(r)); d != "" {
				t.Fatalf("final replay: %s", d)
			}
			if n, _ := segmentFiles(t, fs); n != 1 {
				t.Fatalf("%d restarts left %d segment files, want 1", restarts, n)
			}
		})
	}
}

// TestContinuedSegmentNeverReadsLeftoverRecords sets up the worst case for
// going on in the last segment: past a torn record lies a valid record of
// the same segment (written in the same unsynced batch), and the records
// written after the restart end exactly where that leftover starts. Replay
// must stop before the leftover, although its checksum, segment number and
// index would all fit.
func TestContinuedSegmentNeverReadsLeftoverRecords(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs, 64<<10)
	l, _ := mustOpen(t, cfg)
	hs := &pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(3)}
	must(t, l.SetHardState(hs))
	must(t, l.Append(ents(1, 1, 3, 'a')))
	must(t, l.Sync())
	big := &pb.Entry{Index: proto.Uint64(4), Term: proto.Uint64(1), Data: make([]byte, 400)}
	must(t, l.Append([]*pb.Entry{big, ents(5, 1, 1, 'e')[0]}))
	must(t, l.Sync())
	// Tear entry 4: the state a crash finds if its write was lost in part
	// while entry 5's reached the disk.
	torn, leftover := l.ents[3], l.ents[4]
	seg := l.active()
	_, err := seg.f.WriteAt([]byte{0xff}, torn.off+hdrSize+10)
	must(t, err)
	must(t, l.Close())

	want := newModel()
	want.hs = hs
	want.append(ents(1, 1, 3, 'a'))
	l, r := mustOpen(t, cfg)
	if d := want.diff(fromRecovered(r)); d != "" {
		t.Fatalf("replay after the torn entry: %s", d)
	}
	// An entry 4 whose record ends where the leftover entry 5 starts.
	var e4 *pb.Entry
	for n := range 400 {
		e := &pb.Entry{Index: proto.Uint64(4), Term: proto.Uint64(2), Data: make([]byte, n)}
		if l.active().size+int64(recordSize(proto.Size(e))) == leftover.off {
			e4 = e
			break
		}
	}
	if e4 == nil {
		t.Fatalf("no entry fits between offset %d and the leftover at %d", l.active().size, leftover.off)
	}
	must(t, l.Append([]*pb.Entry{e4}))
	must(t, l.Close())
	want.append([]*pb.Entry{e4})

	l, r = mustOpen(t, cfg)
	defer l.Close()
	if d := want.diff(fromRecovered(r)); d != "" {
		t.Fatalf("replay read the leftover record: %s", d)
	}
	checkLog(t, l, want)
	if n, _ := segmentFiles(t, fs); n != 1 {
		t.Fatalf("%d segment files, want 1", n)
	}
}

// TestTornWriteAfterRestartIsTornTail: a restart after a torn tail that
// had valid records of the next generation behind it goes on two
// generations past the last good record. If the first records written
// after the restart are torn in turn, with a later one intact, that is
// still a torn tail (nothing after the last good record was synced), not
// corruption: the synced marker Open writes first is what shows it.
func TestTornWriteAfterRestartIsTornTail(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs, 64<<10)
	l, _ := mustOpen(t, cfg)
	must(t, l.Append(ents(1, 1, 3, 'a')))
	must(t, l.Sync())
	tear := func(l *Log, index uint64) {
		t.Helper()
		lc := l.ents[index-l.trunc.index-1]
		_, err := l.segment(lc.seq).f.WriteAt([]byte{0xff}, lc.off+hdrSize+10)
		must(t, err)
	}
	// Entries 4 and 5 in the next generation; 4 torn, 5 intact.
	must(t, l.Append(ents(4, 1, 2, 'b')))
	must(t, l.Sync())
	tear(l, 4)
	must(t, l.Close())

	want := newModel()
	want.append(ents(1, 1, 3, 'a'))
	l, r := mustOpen(t, cfg)
	if d := want.diff(fromRecovered(r)); d != "" {
		t.Fatalf("first restart: %s", d)
	}
	must(t, l.Append(ents(4, 2, 2, 'c')))
	must(t, l.Sync())
	tear(l, 4)
	must(t, l.Close())

	l, r, err := Open(cfg)
	if err != nil {
		t.Fatalf("second restart: Open: %v", err)
	}
	defer l.Close()
	if d := want.diff(fromRecovered(r)); d != "" {
		t.Fatalf("second restart: %s", d)
	}
}

// TestLeftoverOfTheNextGenerationIsNotReadAfterTheMarker: the record torn
// at the tail was the first of a batch whose later records reached the
// disk, and it is as long as the marker Open writes over it. The leftover
// right behind the marker is of the generation after the last good
// record, so the marker must be newer still.
func TestLeftoverOfTheNextGenerationIsNotReadAfterTheMarker(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs, 64<<10)
	l, _ := mustOpen(t, cfg)
	hs := &pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(3)}
	must(t, l.SetHardState(hs))
	must(t, l.Append(ents(1, 1, 3, 'a')))
	must(t, l.Sync())
	// A HardState as long as hs (the marker), then entry 4, in one batch.
	tornAt := l.active().size
	must(t, l.SetHardState(&pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(4)}))
	must(t, l.Append(ents(4, 1, 1, 'b')))
	must(t, l.Sync())
	leftover := l.ents[3].off
	_, err := l.active().f.WriteAt([]byte{0xff}, tornAt+hdrSize)
	must(t, err)
	must(t, l.Close())

	want := newModel()
	want.hs = hs
	want.append(ents(1, 1, 3, 'a'))
	l, r := mustOpen(t, cfg)
	if d := want.diff(fromRecovered(r)); d != "" {
		t.Fatalf("first restart: %s", d)
	}
	if end := l.active().size; end != leftover {
		t.Fatalf("test setup: the marker ends at %d, not where the leftover starts (%d)", end, leftover)
	}
	must(t, l.Close())
	l, r = mustOpen(t, cfg)
	defer l.Close()
	if d := want.diff(fromRecovered(r)); d != "" {
		t.Fatalf("second restart read the leftover: %s", d)
	}
}

// failAfterWriteFS fails a file's SyncData once the file was written
// through that handle: a power cut during Open's first sync after its
// marker.
type failAfterWriteFS struct{ vfs.FS }

type failAfterWriteFile struct {
	vfs.File
	wrote bool
}

var errInjected = errors.New("injected sync failure")

func (fs failAfterWriteFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return &failAfterWriteFile{File: f}, nil
}

func (f *failAfterWriteFile) WriteAt(p []byte, off int64) (int, error) {
	f.wrote = true
	return f.File.WriteAt(p, off)
}

func (f *failAfterWriteFile) SyncData() error {
	if f.wrote {
		return errInjected
	}
	return f.File.SyncData()
}

// TestRestartAfterProcessCrashSyncsWhatItRead: a process died with a
// batch written but not synced; the restart reads that batch from the
// page cache, and the power fails while the restart syncs its marker.
// Whatever part of the batch and the marker reached the disk, the next
// Open must succeed with a prefix of the writes: the restart made the
// batch durable before writing the marker after it.
func TestRestartAfterProcessCrashSyncsWhatItRead(t *testing.T) {
	for seed := range 64 {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 31))
			fs := newTornFS(vfs.NewMem())
			l, _ := mustOpen(t, memConfig(fs, 64<<10))
			must(t, l.Append(ents(1, 1, 3, 'a')))
			must(t, l.Sync())
			must(t, l.Append(ents(4, 1, 3, 'b')))
			l.mu.Lock()
			must(t, l.flush())
			l.mu.Unlock()
			must(t, l.lock.Close()) // the process dies: its files stay as written

			if _, _, err := Open(memConfig(failAfterWriteFS{fs}, 64<<10)); !errors.Is(err, errInjected) {
				t.Fatalf("restart: Open: %v, want the injected failure", err)
			}
			l, r, err := Open(memConfig(fs.crash(t, rng, "/wal"), 64<<10))
			if err != nil {
				t.Fatalf("after the power cut: Open: %v", err)
			}
			defer l.Close()
			got := fromRecovered(r)
			want := newModel()
			want.append(ents(1, 1, 3, 'a'))
			for _, e := range ents(4, 1, 3, 'b') {
				if want.diff(got) == "" {
					break
				}
				want.append([]*pb.Entry{e})
			}
			if d := want.diff(got); d != "" {
				t.Fatalf("after the power cut: replay: %s", d)
			}
		})
	}
}
