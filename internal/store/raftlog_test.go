package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/wal"
)

const memDir = "/data"

func openMode(t *testing.T, fs vfs.FS, mode string) *Store {
	t.Helper()
	s, err := Open(memDir, Options{FS: fs, RaftLog: mode, WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatalf("Open(%s): %v", mode, err)
	}
	return s
}

// logState is what raft reads of a store at start.
type logState struct {
	hs            *pb.HardState
	first, last   uint64
	terms         []uint64
	applied, snap uint64
}

func readLogState(t *testing.T, s *Store) logState {
	t.Helper()
	hs, _, _ := s.InitialState()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	es, err := s.Entries(first, last+1, 1<<40)
	if err != nil {
		t.Fatalf("Entries(%d, %d): %v", first, last+1, err)
	}
	var terms []uint64
	for i, e := range es {
		if e.GetIndex() != first+uint64(i) {
			t.Fatalf("entry %d at position %d from %d", e.GetIndex(), i, first)
		}
		terms = append(terms, e.GetTerm())
	}
	snap, _ := s.Snapshot()
	return logState{hs: hs, first: first, last: last, terms: terms, applied: s.Applied(), snap: snap.GetMetadata().GetIndex()}
}

func (a logState) equal(b logState) bool {
	return proto.Equal(a.hs, b.hs) && a.first == b.first && a.last == b.last &&
		slices.Equal(a.terms, b.terms) && a.applied == b.applied && a.snap == b.snap
}

// writePebbleLog gives a store in the "pebble" mode a log compacted to 7,
// entries to 12 (a term change at 6), a HardState and state applied to 10.
func writePebbleLog(t *testing.T, fs vfs.FS) logState {
	t.Helper()
	s := openMode(t, fs, RaftLogPebble)
	defer s.Close()
	commit(t, s, func(u *Update) error {
		return errors.Join(u.Append(append(ents(1, 5, 1), ents(6, 12, 2)...)),
			u.SetHardState(&pb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(uint64(12))}),
			u.SetConfState(&pb.ConfState{Voters: []uint64{1}}),
			u.Put([]byte("k"), []byte("v"), mod(9)), u.SetApplied(10))
	})
	if _, err := s.CreateSnapshot(7); err != nil {
		t.Fatal(err)
	}
	return readLogState(t, s)
}

// TestPebbleLogMigratesToWAL: a directory whose log is in Pebble, opened
// in the "wal" mode, keeps its log, HardState and state, with the log
// moved out of Pebble; it then stays in the "wal" mode, and opening it in
// the "pebble" mode is refused, naming the way forward.
func TestPebbleLogMigratesToWAL(t *testing.T) {
	fs := vfs.NewMem()
	want := writePebbleLog(t, fs)
	for _, reopen := range []string{"migrated", "reopened"} {
		s := openMode(t, fs, RaftLogWAL)
		if got := readLogState(t, s); !got.equal(want) || s.RaftLog() != RaftLogWAL {
			t.Fatalf("%s: log %+v in mode %s, want %+v in wal", reopen, got, s.RaftLog(), want)
		}
		if v, _, ok, err := s.Get([]byte("k")); err != nil || !ok || string(v) != "v" {
			t.Fatalf("%s: Get(k) = %q, %v, %v", reopen, v, ok, err)
		}
		for _, k := range [][]byte{keyHardState, keyTrunc, logKey(8), logKey(12)} {
			if _, ok, err := s.getRaw(k); ok || err != nil {
				t.Fatalf("%s: key %q still in Pebble (%v)", reopen, k, err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Open(memDir, Options{FS: fs, RaftLog: RaftLogPebble})
	if !errors.Is(err, ErrRaftLogMode) || !strings.Contains(err.Error(), "--raft-log=wal") {
		t.Fatalf("Open in the pebble mode = %v, want ErrRaftLogMode naming --raft-log=wal", err)
	}
}

// TestMigrationCutShortIsRedone: a crash before the migration's last batch
// leaves the directory in the "pebble" mode with whatever the copy had
// written in wal/; the next Open copies again from Pebble, over it.
func TestMigrationCutShortIsRedone(t *testing.T) {
	fs := vfs.NewMem()
	want := writePebbleLog(t, fs)
	// A copy cut short: a log that disagrees with Pebble's, compacted
	// beyond Pebble's truncation point.
	l, _, err := wal.Open(wal.Config{Dir: fs.PathJoin(memDir, WALDir), FS: fs, SegmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(l.Append(ents(1, 10, 9)), l.SetHardState(&pb.HardState{Term: new(uint64(9)), Commit: new(uint64(10))}),
		l.Compact(9), l.Close()); err != nil {
		t.Fatal(err)
	}
	s := openMode(t, fs, RaftLogWAL)
	defer s.Close()
	if got := readLogState(t, s); !got.equal(want) {
		t.Fatalf("log after the redone migration %+v, want %+v", got, want)
	}
}

// hookFS calls before(name) ahead of every write or sync of a file.
type hookFS struct {
	vfs.FS
	before atomic.Pointer[func(name string)]
}

func (fs *hookFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, fs: fs, name: name}, nil
}

func (fs *hookFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *hookFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

func (fs *hookFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

type hookFile struct {
	vfs.File
	fs   *hookFS
	name string
}

func (f *hookFile) hook() {
	if fn := f.fs.before.Load(); fn != nil {
		(*fn)(f.name)
	}
}

func (f *hookFile) Write(p []byte) (int, error) {
	f.hook()
	return f.File.Write(p)
}

func (f *hookFile) WriteAt(p []byte, off int64) (int, error) {
	f.hook()
	return f.File.WriteAt(p, off)
}

func (f *hookFile) SyncData() error {
	f.hook()
	return f.File.SyncData()
}

func (f *hookFile) Sync() error {
	f.hook()
	return f.File.Sync()
}

// inWAL reports whether a file is one of the raft log's segments (not a
// spare, which the log zero-fills in the background at any time).
func inWAL(name string) bool {
	return strings.Contains(name, "/"+WALDir+"/") && strings.HasSuffix(name, ".wal")
}

// TestAppliedStateWaitsForTheLog: an Update that applies entries it
// appends reaches Pebble only after the log's fdatasync (rule 1), even
// unsynced: at the log's sync Pebble must not hold the Update's applied
// index yet, and a power cut keeping every unsynced byte must reopen.
func TestAppliedStateWaitsForTheLog(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fs := &hookFS{FS: mem}
	s := openMode(t, fs, RaftLogWAL)
	defer s.Close()
	var early atomic.Bool
	hook := func(name string) {
		if inWAL(name) {
			if v, ok, _ := s.getRaw(keyApplied); ok && len(v) == 8 && v[0] == 3 {
				early.Store(true)
			}
		}
	}
	fs.before.Store(&hook)
	u := s.NewUpdate()
	if err := errors.Join(u.Append(ents(1, 3, 1)), u.SetHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(3))}),
		u.Put([]byte("k"), []byte("v"), mod(3)), u.SetApplied(3)); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(false); err != nil {
		t.Fatal(err)
	}
	fs.before.Store(nil)
	if early.Load() {
		t.Fatal("Pebble held the applied index before the log's entries were synced")
	}
	for _, k := range [][]byte{keyHardState, logKey(1), logKey(3)} {
		if _, ok, err := s.getRaw(k); ok || err != nil {
			t.Fatalf("the raft log's key %q went to Pebble (%v)", k, err)
		}
	}
	s2 := openMode(t, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), RaftLogWAL)
	defer s2.Close()
	if got := readLogState(t, s2); got.last != 3 || got.hs.GetCommit() < got.applied {
		t.Fatalf("after the cut: %+v", got)
	}
}

// openWAL opens the store in the "wal" mode, with Pebble's own log if
// pebbleWAL.
func openWAL(t *testing.T, fs vfs.FS, pebbleWAL bool) *Store {
	t.Helper()
	s, err := Open(memDir, Options{FS: fs, RaftLog: RaftLogWAL, WALSegmentSize: testSegmentSize, Knobs: Knobs{PebbleWAL: pebbleWAL}})
	if err != nil {
		t.Fatalf("Open(wal, Pebble's WAL %v): %v", pebbleWAL, err)
	}
	return s
}

// TestCompactionTrailsDurableState: the log is compacted only once the
// state through the compaction point is durable (rule 2). State applied
// unsynced, then a snapshot compacting the log, then a power cut that
// keeps nothing unsynced: the store must reopen with the state the log no
// longer holds the entries of, or with the log still holding them. With
// Pebble's log the snapshot's synced record makes the state durable and
// the log is compacted at once; without it the compaction waits for a
// flush, and a snapshot after one compacts.
func TestCompactionTrailsDurableState(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pebbleWAL bool
		flush     bool // Pebble flushes after the first snapshot, a second one follows
		applied   uint64
		first     uint64
	}{
		{"pebble's log: compacted at once", true, false, 8, 9},
		{"no pebble log, no flush: kept", false, false, 0, 1},
		{"no pebble log, a flush: compacted at the next snapshot", false, true, 8, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			s := openWAL(t, mem, tc.pebbleWAL)
			defer s.Close()
			commit(t, s, func(u *Update) error {
				return errors.Join(u.Append(ents(1, 10, 1)), u.SetHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(10))}),
					u.SetConfState(&pb.ConfState{Voters: []uint64{1}}))
			})
			u := s.NewUpdate()
			if err := errors.Join(u.Put([]byte("k"), []byte("v"), mod(8)), u.SetApplied(8)); err != nil {
				t.Fatal(err)
			}
			if err := u.Commit(false); err != nil { // entries durable already: nothing synced
				t.Fatal(err)
			}
			if _, err := s.CreateSnapshot(8); err != nil {
				t.Fatal(err)
			}
			if tc.flush {
				if err := s.db.Flush(); err != nil {
					t.Fatal(err)
				}
				if _, err := s.CreateSnapshot(8); err != nil {
					t.Fatal(err)
				}
			}
			s2 := openWAL(t, mem.CrashClone(vfs.CrashCloneCfg{}), tc.pebbleWAL)
			defer s2.Close()
			if got := readLogState(t, s2); got.applied != tc.applied || got.first != tc.first || got.last != 10 {
				t.Fatalf("after the cut: %+v, want applied %d, log (%d, 10]", got, tc.applied, tc.first-1)
			}
			if v, _, ok, err := s2.Get([]byte("k")); err != nil || ok != (tc.applied == 8) || ok && string(v) != "v" {
				t.Fatalf("Get(k) = %q, %v, %v", v, ok, err)
			}
		})
	}
}

// TestFullMemtableLetsTheLogCompact: without Pebble's log, the flushes
// Pebble makes on its own when the memtable fills are what let the
// waiting compactions happen (flushMark), and state is never lost to
// them: after a power cut at any snapshot, the store reopens with its log
// holding every entry after the durable applied index. (That a snapshot
// forces no flush: TestCompactionTrailsDurableState.)
func TestFullMemtableLetsTheLogCompact(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open(memDir, Options{FS: mem, RaftLog: RaftLogWAL, WALSegmentSize: testSegmentSize, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit(t, s, func(u *Update) error { return u.SetConfState(&pb.ConfState{Voters: []uint64{1}}) })
	value := make([]byte, 1024)
	var cuts []*vfs.MemFS
	const n, every = 3000, 200
	for i := uint64(1); i <= n; i++ {
		u := s.NewUpdate()
		if err := errors.Join(u.Append(ents(i, i, 1)), u.SetHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(i)}),
			u.Put([]byte(fmt.Sprintf("k%d", i%100)), value, mod(i)), u.SetApplied(i)); err != nil {
			t.Fatal(err)
		}
		if err := u.Commit(true); err != nil {
			t.Fatal(err)
		}
		if i%every == 0 {
			if _, err := s.CreateSnapshot(i - every/2); err != nil {
				t.Fatal(err)
			}
			cuts = append(cuts, mem.CrashClone(vfs.CrashCloneCfg{}))
		}
	}
	if first := s.wal.FirstIndex(); first < 2 {
		t.Fatalf("the log was never compacted (first index %d)", first)
	}
	for i, fs := range cuts {
		s2, err := Open(memDir, Options{FS: fs, RaftLog: RaftLogWAL, WALSegmentSize: testSegmentSize})
		if err != nil {
			t.Fatalf("reopen after the cut at snapshot %d: %v", i, err)
		}
		got := readLogState(t, s2)
		if got.first > got.applied+1 || got.last != uint64(i+1)*every {
			t.Errorf("after the cut at snapshot %d: applied %d, log (%d, %d]", i, got.applied, got.first-1, got.last)
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotInstallCutBeforeLogReset: a power cut after a snapshot's
// install reached Pebble (synced) and before the log was reset to it
// (rule 3) reopens with the snapshot's state, the log reset to its index
// and a HardState committed through it.
func TestSnapshotInstallCutBeforeLogReset(t *testing.T) {
	src := openT(t, t.TempDir(), 0)
	defer src.Close()
	commit(t, src, func(u *Update) error {
		return errors.Join(u.Append(ents(1, 20, 3)), u.SetConfState(&pb.ConfState{Voters: []uint64{1, 2}}),
			u.SetMember(Member{ID: 1, Addr: "h1:1"}), u.Put([]byte("k"), []byte("v"), mod(20)), u.SetApplied(20))
	})
	snap, err := src.CreateSnapshot(0)
	if err != nil {
		t.Fatal(err)
	}

	mem := vfs.NewCrashableMem()
	fs := &hookFS{FS: mem}
	dst := openMode(t, fs, RaftLogWAL)
	defer dst.Close()
	commit(t, dst, func(u *Update) error {
		// Its log reaches the snapshot's index, in another term: the
		// entry there is not the snapshot's.
		return errors.Join(u.Append(ents(1, 20, 1)), u.SetHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(2))}),
			u.Put([]byte("stale"), []byte("x"), mod(2)), u.SetApplied(2))
	})
	cp := src.Checkpoint()
	defer cp.Release()
	st := dst.NewStaged(cp.Index(), cp.Term())
	if err := transfer(cp, st); err != nil {
		t.Fatal(err)
	}
	var cut atomic.Pointer[vfs.MemFS]
	var once sync.Once
	hook := func(name string) {
		if inWAL(name) {
			once.Do(func() { cut.Store(mem.CrashClone(vfs.CrashCloneCfg{})) })
		}
	}
	fs.before.Store(&hook)
	u := dst.NewUpdate()
	if err := u.InstallSnapshot(snap, st); err != nil {
		t.Fatal(err)
	}
	if err := u.SetHardState(&pb.HardState{Term: new(uint64(4)), Commit: new(uint64(20))}); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(true); err != nil {
		t.Fatal(err)
	}
	fs.before.Store(nil)
	if cut.Load() == nil {
		t.Fatal("the install wrote nothing to the log")
	}
	s2 := openMode(t, cut.Load(), RaftLogWAL)
	defer s2.Close()
	got := readLogState(t, s2)
	if got.applied != 20 || got.first != 21 || got.last != 20 || got.hs.GetCommit() != 20 || got.hs.GetTerm() < 3 {
		t.Fatalf("after the cut: %+v (HardState %v), want applied 20, an empty log at 20, commit 20, term >= 3", got, got.hs)
	}
	if term, err := s2.Term(20); term != 3 || err != nil {
		t.Fatalf("Term(20) = %d, %v; want the snapshot's 3", term, err)
	}
	if _, _, ok, _ := s2.Get([]byte("stale")); ok {
		t.Fatal("state from before the snapshot survived")
	}
	if v, _, ok, err := s2.Get([]byte("k")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("Get(k) = %q, %v, %v", v, ok, err)
	}
}

// TestCommitRaisedToDurableApplied: state applied from entries durable in
// the log may reach Pebble's disk before the log's next sync carries the
// HardState that commits them; Open raises the commit to the applied
// index, as raft requires (Config.Applied <= commit).
func TestCommitRaisedToDurableApplied(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := openMode(t, mem, RaftLogWAL)
	defer s.Close()
	commit(t, s, func(u *Update) error {
		return errors.Join(u.Append(ents(1, 10, 1)), u.SetHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(5))}))
	})
	u := s.NewUpdate()
	if err := errors.Join(u.SetHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(8))}),
		u.Put([]byte("k"), []byte("v"), mod(8)), u.SetApplied(8)); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(false); err != nil {
		t.Fatal(err)
	}
	// Pebble's own durability (a flush, another writer's sync) makes
	// the Update durable.
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	s2 := openMode(t, mem.CrashClone(vfs.CrashCloneCfg{}), RaftLogWAL)
	defer s2.Close()
	if got := readLogState(t, s2); got.applied != 8 || got.hs.GetCommit() != 8 || got.last != 10 {
		t.Fatalf("after the cut: %+v, want applied 8, commit 8, last 10", got)
	}
}

// TestLogCompactsWhereTheStateWritesLittle: entries that write next to
// nothing to Pebble never fill its memtable, so no flush of its own lets
// a compaction happen; the store asks for one once more than
// maxPendingCompactions wait, and the log is compacted, safely.
func TestLogCompactsWhereTheStateWritesLittle(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := openWAL(t, mem, false)
	defer s.Close()
	commit(t, s, func(u *Update) error { return u.SetConfState(&pb.ConfState{Voters: []uint64{1}}) })
	opened := s.db.Metrics().Flush.Count // Open's own
	const n, every = 1000, 100
	for i := uint64(1); i <= n; i++ {
		commit(t, s, func(u *Update) error {
			return errors.Join(u.Append(ents(i, i, 1)), u.SetHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(i)}), u.SetApplied(i))
		})
		if i%every == 0 {
			if _, err := s.CreateSnapshot(i - every/2); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The flush asked for runs in the background: once it has, the next
	// snapshot compacts.
	for deadline := time.Now().Add(10 * time.Second); s.db.Metrics().Flush.Count == opened; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no flush after a snapshot's compaction waited for one")
		}
	}
	if _, err := s.CreateSnapshot(n - every/2); err != nil {
		t.Fatal(err)
	}
	if first := s.wal.FirstIndex(); first < 2 {
		t.Fatalf("log from %d after %d entries: never compacted", first, n)
	}
	s2 := openWAL(t, mem.CrashClone(vfs.CrashCloneCfg{}), false)
	defer s2.Close()
	if got := readLogState(t, s2); got.first > got.applied+1 || got.last != n {
		t.Fatalf("after the cut: applied %d, log (%d, %d]", got.applied, got.first-1, got.last)
	}
}
