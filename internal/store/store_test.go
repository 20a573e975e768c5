package store

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvd-project/kvd/internal/revision"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func openT(t *testing.T, dir string, cache int) *Store {
	t.Helper()
	s, err := Open(dir, Options{EntryCacheSize: cache, WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func ents(lo, hi, term uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := lo; i <= hi; i++ {
		out = append(out, &pb.Entry{Index: new(i), Term: new(term), Data: []byte(fmt.Sprintf("e%d-%d", i, term))})
	}
	return out
}

func commit(t *testing.T, s *Store, f func(u *Update) error) {
	t.Helper()
	u := s.NewUpdate()
	if err := f(u); err != nil {
		u.Close()
		t.Fatalf("update: %v", err)
	}
	if err := u.Commit(true); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func indexes(es []*pb.Entry) []uint64 {
	var out []uint64
	for _, e := range es {
		out = append(out, e.GetIndex())
	}
	return out
}

func seq(lo, hi uint64) []uint64 {
	var out []uint64
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

// cacheSizes runs a test with the entry cache off, smaller than the log, and
// at its default, with the raft log in Pebble and in a WAL: every answer
// must come out the same.
var cacheSizes = []logSetup{
	{"nocache", -1, RaftLogPebble}, {"cache3", 3, RaftLogPebble}, {"default", 0, RaftLogPebble},
	{"wal-nocache", -1, RaftLogWAL}, {"wal-cache3", 3, RaftLogWAL}, {"wal-default", 0, RaftLogWAL},
}

type logSetup struct {
	name    string
	size    int
	raftLog string
}

// openCS opens the store in dir with cs's cache and raft log.
func openCS(t *testing.T, dir string, cs logSetup) *Store {
	t.Helper()
	s, err := Open(dir, Options{EntryCacheSize: cs.size, RaftLog: cs.raftLog, WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// testSegmentSize keeps the WAL's segment files (zero-filled when made)
// small in tests.
const testSegmentSize = 1 << 20

func TestFreshStore(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	hs, cs, err := s.InitialState()
	if err != nil || !etcdraft.IsEmptyHardState(hs) || len(cs.GetVoters()) != 0 {
		t.Fatalf("InitialState = %v, %v, %v; want empty", hs, cs, err)
	}
	fi, _ := s.FirstIndex()
	li, _ := s.LastIndex()
	if fi != 1 || li != 0 {
		t.Fatalf("First/Last = %d/%d, want 1/0", fi, li)
	}
	if term, err := s.Term(0); term != 0 || err != nil {
		t.Fatalf("Term(0) = %d, %v", term, err)
	}
	if _, err := s.Term(1); !errors.Is(err, etcdraft.ErrUnavailable) {
		t.Fatalf("Term(1) err = %v, want ErrUnavailable", err)
	}
	if snap, _ := s.Snapshot(); !etcdraft.IsEmptySnap(snap) {
		t.Fatalf("Snapshot not empty: %v", snap)
	}
	if s.Checkpoint() != nil {
		t.Fatal("checkpoint on a fresh store")
	}
}

func TestLogReadsAndBounds(t *testing.T) {
	for _, cs := range cacheSizes {
		t.Run(cs.name, func(t *testing.T) {
			s := openCS(t, t.TempDir(), cs)
			defer s.Close()
			commit(t, s, func(u *Update) error { return u.Append(ents(1, 10, 1)) })
			entSize := uint64(len(mustMarshal(t, ents(1, 1, 1)[0])))

			tests := []struct {
				name    string
				lo, hi  uint64
				maxSize uint64
				want    []uint64
				err     error
			}{
				{"all", 1, 11, 1 << 20, seq(1, 10), nil},
				{"middle", 4, 7, 1 << 20, seq(4, 6), nil},
				{"empty range", 5, 5, 1 << 20, nil, nil},
				{"at least one", 3, 11, 0, seq(3, 3), nil},
				{"size limit", 2, 11, 3 * entSize, seq(2, 4), nil},
				{"size limit exact", 2, 11, 3*entSize + 1, seq(2, 4), nil},
				{"beyond last", 5, 12, 1 << 20, nil, etcdraft.ErrUnavailable},
				{"index zero", 0, 3, 1 << 20, nil, etcdraft.ErrCompacted},
			}
			for _, tt := range tests {
				got, err := s.Entries(tt.lo, tt.hi, tt.maxSize)
				if !errors.Is(err, tt.err) || (err != nil) != (tt.err != nil) {
					t.Errorf("%s: err = %v, want %v", tt.name, err, tt.err)
					continue
				}
				if !slices.Equal(indexes(got), tt.want) {
					t.Errorf("%s: got %v, want %v", tt.name, indexes(got), tt.want)
				}
			}
			for i := uint64(1); i <= 10; i++ {
				if term, err := s.Term(i); term != 1 || err != nil {
					t.Errorf("Term(%d) = %d, %v", i, term, err)
				}
			}
			if _, err := s.Term(11); !errors.Is(err, etcdraft.ErrUnavailable) {
				t.Errorf("Term(11) err = %v", err)
			}
		})
	}
}

func mustMarshal(t *testing.T, e *pb.Entry) []byte {
	t.Helper()
	b, err := proto.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendReplacesSuffixAndSurvivesRestart(t *testing.T) {
	for _, cs := range cacheSizes {
		t.Run(cs.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openCS(t, dir, cs)
			commit(t, s, func(u *Update) error { return u.Append(ents(1, 10, 1)) })
			// A new leader overwrites 6.. with a shorter log of term 2.
			commit(t, s, func(u *Update) error { return u.Append(ents(6, 8, 2)) })
			check := func(s *Store) {
				t.Helper()
				if li, _ := s.LastIndex(); li != 8 {
					t.Fatalf("LastIndex = %d, want 8", li)
				}
				got, err := s.Entries(1, 9, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range got {
					want := uint64(1)
					if e.GetIndex() >= 6 {
						want = 2
					}
					if e.GetTerm() != want || !bytes.Equal(e.GetData(), ents(e.GetIndex(), e.GetIndex(), want)[0].GetData()) {
						t.Errorf("entry %d: term %d data %q, want term %d", e.GetIndex(), e.GetTerm(), e.GetData(), want)
					}
				}
				if _, err := s.Entries(8, 10, 1<<20); !errors.Is(err, etcdraft.ErrUnavailable) {
					t.Errorf("Entries past the replaced end: err = %v", err)
				}
			}
			check(s)
			s.Close()
			s = openCS(t, dir, cs)
			defer s.Close()
			check(s)
		})
	}
}

func TestAppendRejectsGapsAndCompactedIndexes(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	commit(t, s, func(u *Update) error { return u.Append(ents(1, 5, 1)) })
	u := s.NewUpdate()
	defer u.Close()
	if err := u.Append(ents(7, 8, 1)); err == nil {
		t.Fatal("append leaving a gap succeeded")
	}
	if err := u.Append(ents(0, 1, 1)); err == nil {
		t.Fatal("append at index 0 succeeded")
	}
}

func TestSnapshotCompactionBoundaries(t *testing.T) {
	for _, cs := range cacheSizes {
		t.Run(cs.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openCS(t, dir, cs)
			conf := &pb.ConfState{Voters: []uint64{1, 2, 3}}
			commit(t, s, func(u *Update) error {
				return errors.Join(u.Append(append(ents(1, 5, 1), ents(6, 12, 2)...)),
					u.SetHardState(&pb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(uint64(12))}),
					u.SetConfState(conf),
					u.SetMember(Member{ID: 1, Addr: "a:1"}),
					u.Put([]byte("k"), []byte("v"), mod(9)),
					u.SetApplied(10))
			})
			snap, err := s.CreateSnapshot(7)
			if err != nil {
				t.Fatal(err)
			}
			if snap.GetMetadata().GetIndex() != 10 || snap.GetMetadata().GetTerm() != 2 {
				t.Fatalf("snapshot at %d/%d, want 10/2", snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm())
			}
			check := func(s *Store) {
				t.Helper()
				tests := []struct {
					name string
					got  func() (any, error)
					want any
					err  error
				}{
					{"FirstIndex", func() (any, error) { return s.FirstIndex() }, uint64(8), nil},
					{"LastIndex", func() (any, error) { return s.LastIndex() }, uint64(12), nil},
					{"Term(7) kept", func() (any, error) { return s.Term(7) }, uint64(2), nil},
					{"Term(6) compacted", func() (any, error) { return s.Term(6) }, uint64(0), etcdraft.ErrCompacted},
					{"Term(12)", func() (any, error) { return s.Term(12) }, uint64(2), nil},
					{"Term(13)", func() (any, error) { return s.Term(13) }, uint64(0), etcdraft.ErrUnavailable},
					{"Entries(7,..) compacted", func() (any, error) {
						e, err := s.Entries(7, 9, 1<<20)
						return indexes(e), err
					}, []uint64(nil), etcdraft.ErrCompacted},
					{"Entries(8,13)", func() (any, error) {
						e, err := s.Entries(8, 13, 1<<20)
						return indexes(e), err
					}, seq(8, 12), nil},
				}
				for _, tt := range tests {
					got, err := tt.got()
					if !errors.Is(err, tt.err) || (err != nil) != (tt.err != nil) {
						t.Errorf("%s: err = %v, want %v", tt.name, err, tt.err)
						continue
					}
					if fmt.Sprint(got) != fmt.Sprint(tt.want) {
						t.Errorf("%s = %v, want %v", tt.name, got, tt.want)
					}
				}
				snap, _ := s.Snapshot()
				if snap.GetMetadata().GetIndex() != 10 || !slices.Equal(snap.GetMetadata().GetConfState().GetVoters(), conf.GetVoters()) {
					t.Errorf("Snapshot() = %v", snap.GetMetadata())
				}
				ms, err := DecodeMembers(snap.GetData())
				if err != nil || len(ms) != 1 || ms[0].Addr != "a:1" {
					t.Errorf("snapshot members = %v, %v", ms, err)
				}
				cp := s.Checkpoint()
				if cp == nil || cp.Index() != 10 || cp.Term() != 2 {
					t.Fatalf("checkpoint = %+v", cp)
				}
				cp.Release()
			}
			check(s)
			// Compacting again below the truncation point changes nothing.
			commit(t, s, func(u *Update) error { return u.SetApplied(11) })
			if _, err := s.CreateSnapshot(3); err != nil {
				t.Fatal(err)
			}
			if fi, _ := s.FirstIndex(); fi != 8 {
				t.Fatalf("FirstIndex after no-op compaction = %d", fi)
			}
			s.Close()
			s = openCS(t, dir, cs)
			defer s.Close()
			if s.Applied() != 11 {
				t.Fatalf("Applied after restart = %d", s.Applied())
			}
			// Open snapshots the applied state so it can be sent at once.
			if snap, _ := s.Snapshot(); snap.GetMetadata().GetIndex() != 11 {
				t.Fatalf("snapshot after restart at %d, want 11", snap.GetMetadata().GetIndex())
			}
			hs, cs, _ := s.InitialState()
			if hs.GetTerm() != 2 || hs.GetVote() != 1 || hs.GetCommit() != 12 || !slices.Equal(cs.GetVoters(), conf.GetVoters()) {
				t.Fatalf("InitialState after restart = %v, %v", hs, cs)
			}
		})
	}
}

func TestKVApplyIsAtomicWithAppliedIndex(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, 0)
	commit(t, s, func(u *Update) error {
		errs := []error{u.Append(ents(1, 4, 1)), u.Put([]byte("a"), []byte("1"), mod(1)), u.Put([]byte("b"), []byte("2"), mod(2))}
		existed, err := u.Delete([]byte("a"), 3) // sees the Put in the same batch
		if !existed {
			t.Error("Delete did not see a Put from its own Update")
		}
		missing, err2 := u.Delete([]byte("nope"), 3)
		if missing {
			t.Error("Delete of a missing key reported existed")
		}
		return errors.Join(append(errs, err, err2, u.Put([]byte("c"), []byte("3"), mod(4)), u.SetApplied(4))...)
	})
	// An abandoned Update leaves no trace.
	u := s.NewUpdate()
	_ = u.Put([]byte("z"), []byte("lost"), mod(5))
	_ = u.SetApplied(5)
	u.Close()
	s.Close()

	s = openT(t, dir, 0)
	defer s.Close()
	if s.Applied() != 4 {
		t.Fatalf("Applied = %d, want 4", s.Applied())
	}
	tests := []struct {
		key     string
		val     string
		version uint64
		ok      bool
	}{{"a", "", 0, false}, {"b", "2", 2, true}, {"c", "3", 4, true}, {"z", "", 0, false}}
	for _, tt := range tests {
		v, m, ok, err := s.Get([]byte(tt.key))
		if err != nil || ok != tt.ok || string(v) != tt.val || m.Mod != tt.version {
			t.Errorf("Get(%s) = %q,%d,%v,%v; want %q,%d,%v", tt.key, v, m.Mod, ok, err, tt.val, tt.version, tt.ok)
		}
	}
	var keys []string
	if err := s.ForEach(func(k, v []byte, m revision.Meta) error { keys = append(keys, string(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"b", "c"}) {
		t.Fatalf("ForEach keys = %v", keys)
	}
	stop := errors.New("stop")
	if err := s.ForEach(func(k, v []byte, m revision.Meta) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("ForEach error = %v, want the callback's", err)
	}
}

// TestSnapshotTransfer moves a checkpoint from one store to another through
// Staged, the way a leader's state reaches a lagging follower.
func TestSnapshotTransfer(t *testing.T) {
	src := openT(t, t.TempDir(), 0)
	defer src.Close()
	commit(t, src, func(u *Update) error {
		var errs []error
		errs = append(errs, u.Append(ents(1, 20, 3)), u.SetConfState(&pb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{3}}))
		for i := range 50 {
			errs = append(errs, u.Put(fmt.Appendf(nil, "key%03d", i), fmt.Appendf(nil, "val%d", i), mod(uint64(i+1))))
		}
		errs = append(errs, u.SetMember(Member{ID: 1, Addr: "h1:1"}), u.SetMember(Member{ID: 2, Addr: "h2:1"}),
			u.SetMember(Member{ID: 3, Addr: "h3:1", IsLearner: true}), u.SetMember(Member{ID: 4, Addr: "h4:1"}),
			u.RemoveMember(4), u.SetApplied(20))
		return errors.Join(errs...)
	})
	snap, err := src.CreateSnapshot(15)
	if err != nil {
		t.Fatal(err)
	}
	// Writes after the snapshot must not leak into the transfer.
	commit(t, src, func(u *Update) error {
		return errors.Join(u.Append(ents(21, 21, 3)), u.Put([]byte("key000"), []byte("later"), mod(21)), u.SetApplied(21))
	})

	dir := t.TempDir()
	dst := openT(t, dir, 0)
	commit(t, dst, func(u *Update) error {
		return errors.Join(u.Append(ents(1, 4, 1)), u.Put([]byte("stale"), []byte("x"), mod(2)), u.SetApplied(3))
	})
	// A transfer cut short, never installed.
	abandoned := dst.NewStaged(99, 9)
	if err := errors.Join(abandoned.Add(histRecord([]byte("ghost"), nil, mod(1))), abandoned.Finish()); err != nil {
		t.Fatal(err)
	}

	cp := src.Checkpoint()
	st := dst.NewStaged(cp.Index(), cp.Term())
	if err := transfer(cp, st); err != nil {
		t.Fatal(err)
	}
	cp.Release()
	if _, _, ok, _ := dst.Get([]byte("key001")); ok {
		t.Fatal("staged data visible before install")
	}
	u := dst.NewUpdate()
	if err := u.InstallSnapshot(snap, dst.NewStaged(1, 1)); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("install with wrong staged data: err = %v", err)
	}
	if err := u.InstallSnapshot(snap, st); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(true); err != nil {
		t.Fatal(err)
	}
	if err := st.Discard(); err != nil { // no-op once installed
		t.Fatal(err)
	}
	// The installed snapshot can be sent on at once.
	if cp := dst.Checkpoint(); cp == nil || cp.Index() != 20 || cp.Term() != 3 {
		t.Fatalf("checkpoint after install = %+v", cp)
	} else {
		n := 0
		_ = cp.ForEach(func(k, raw []byte) error { n++; return nil })
		cp.Release()
		if n != 50 {
			t.Fatalf("checkpoint after install holds %d keys, want 50", n)
		}
	}
	dst.Close()
	dst = openT(t, dir, 0)
	defer dst.Close()

	if dst.Applied() != 20 {
		t.Fatalf("Applied = %d, want 20", dst.Applied())
	}
	fi, _ := dst.FirstIndex()
	li, _ := dst.LastIndex()
	if term, err := dst.Term(20); fi != 21 || li != 20 || term != 3 || err != nil {
		t.Fatalf("log after install: first %d last %d term(20) %d %v", fi, li, term, err)
	}
	got := map[string]string{}
	_ = dst.ForEach(func(k, v []byte, m revision.Meta) error { got[string(k)] = fmt.Sprintf("%s@%d", v, m.Mod); return nil })
	if len(got) != 50 || got["key000"] != "val0@1" || got["key049"] != "val49@50" {
		t.Fatalf("installed state has %d keys, key000=%q key049=%q", len(got), got["key000"], got["key049"])
	}
	ms := dst.Members()
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	if len(ms) != 3 || ms[2] != (Member{ID: 3, Addr: "h3:1", IsLearner: true}) {
		t.Fatalf("members after install = %v", ms)
	}
	if !dst.Removed(4) || dst.Removed(3) {
		t.Fatalf("after install: member 4 removed %t (want its tombstone), 3 removed %t", dst.Removed(4), dst.Removed(3))
	}
	if _, cs, _ := dst.InitialState(); !slices.Equal(cs.GetLearners(), []uint64{3}) {
		t.Fatalf("ConfState after install = %v", cs)
	}
	// Nothing but the current generation survives a restart.
	if n, cur := countKeys(t, dst.db, revStart, revEnd), countKeys(t, dst.db, revGenPrefix(dst.gen), revGenEnd(dst.gen)); n != cur || n == 0 {
		t.Fatalf("%d history records on disk, %d of the current generation (stray generations left)", n, cur)
	}
}

func countKeys(t *testing.T, db *pebble.DB, lo, hi []byte) int {
	t.Helper()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

func TestMembersRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   []Member
	}{
		{"empty", nil},
		{"one", []Member{{ID: 7, Addr: "x:1"}}},
		{"learner and unsorted", []Member{{ID: 9, Addr: "b:2", IsLearner: true}, {ID: 2, Addr: ""}}},
		{"tombstone", []Member{{ID: 3, Addr: "c:3"}, {ID: 1, Removed: true}}},
	}
	for _, tt := range tests {
		out, err := DecodeMembers(EncodeMembers(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		want := slices.Clone(tt.in)
		slices.SortFunc(want, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
		if !slices.Equal(out, want) && !(len(out) == 0 && len(want) == 0) {
			t.Errorf("%s: got %v want %v", tt.name, out, want)
		}
	}
	for name, b := range map[string][]byte{
		"truncated":             {5, 1},
		"tombstone, an address": {1, 7, 2, memberRemoved, 'x'},
		"unknown flags":         {1, 7, 1, memberRemoved + 1},
	} {
		if _, err := DecodeMembers(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s member list: err = %v", name, err)
		}
	}
}

// TestRemovedMemberTombstone: a removed member leaves a tombstone that
// Removed reports, before and after a restart, and the address book's
// readers never show; setting the member again (raft applied its
// addition) lifts it.
func TestRemovedMemberTombstone(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, 0)
	commit(t, s, func(u *Update) error {
		return errors.Join(u.SetMember(Member{ID: 1, Addr: "h1:1"}), u.SetMember(Member{ID: 2, Addr: "h2:1"}))
	})
	commit(t, s, func(u *Update) error {
		if err := u.RemoveMember(2); err != nil {
			return err
		}
		if _, ok := u.Member(2); ok {
			return errors.New("the update still shows member 2")
		}
		return nil
	})
	check := func(when string) {
		t.Helper()
		_, ok := s.Member(2)
		if ms := s.Members(); ok || !s.Removed(2) || s.Removed(1) || s.NumMembers() != 1 || len(ms) != 1 || ms[0].ID != 1 {
			t.Fatalf("%s: Member(2) found %t, Removed(2) %t, Removed(1) %t, NumMembers %d, Members %v",
				when, ok, s.Removed(2), s.Removed(1), s.NumMembers(), ms)
		}
	}
	check("after the removal")
	s.Close()
	s = openT(t, dir, 0)
	defer s.Close()
	check("after a restart")
	commit(t, s, func(u *Update) error { return u.SetMember(Member{ID: 2, Addr: "h2:2"}) })
	if m, ok := s.Member(2); !ok || s.Removed(2) || m.Addr != "h2:2" {
		t.Fatalf("set again: Member(2) = %v, %t; Removed %t", m, ok, s.Removed(2))
	}
}

func BenchmarkUpdatePut(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	key := []byte("benchmark-key-0001")
	val := bytes.Repeat([]byte("v"), 100)
	u := s.NewUpdate()
	defer u.Close()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := u.Put(key, val, mod(uint64(i))); err != nil {
			b.Fatal(err)
		}
	}
}

// transfer stages all of cp in st, as a snapshot transfer does (the
// history, the leases, the revisions), and finishes it.
func transfer(cp *Checkpoint, st *Staged) error {
	return errors.Join(cp.ForEach(st.Add), cp.ForEachLease(st.AddLease), cp.ForEachRevision(st.AddRevision), st.Finish())
}

// histRecord is a history record of key's write of value with Meta m
// (the only write of its revision), as Staged.Add takes it.
func histRecord(key, value []byte, m revision.Meta) (k, raw []byte) {
	return appendOrderKey(nil, 0, m.Mod, 0, key)[revKeyHeader+1:], appendHistValue(nil, m, value, false)
}
