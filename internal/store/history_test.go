package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
)

// histEntry is a key's value and Meta in the model.
type histEntry struct {
	value string
	m     revision.Meta
}

// histWrite is one write of a revision: a put of value, or a delete.
type histWrite struct {
	key, value string
	del        bool
}

// histModel is what the store's history must answer: the state at every
// revision, and every change with its previous entry.
type histModel struct {
	mu     sync.RWMutex
	states []map[string]histEntry // states[r]: the state at revision r
	events []histEvent
}

type histEvent struct {
	key     string
	entry   histEntry
	deleted bool
	prev    *histEntry
}

func newHistModel() *histModel {
	return &histModel{states: []map[string]histEntry{{}}}
}

func (hm *histModel) rev() uint64 {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	return uint64(len(hm.states) - 1)
}

func (hm *histModel) state(rev uint64) map[string]histEntry {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	return hm.states[rev]
}

// record writes one revision's writes through u (as the state machine
// would: SetRevision and RecordHistory) and adds it to the model. A delete
// of a missing key changes nothing; a revision of only such deletes is
// not a revision (it returns false and writes nothing).
func (hm *histModel) record(u *Update, writes []histWrite) (bool, error) {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	cur := hm.states[len(hm.states)-1]
	next := make(map[string]histEntry, len(cur)+len(writes))
	for k, e := range cur {
		next[k] = e
	}
	rev := uint64(len(hm.states))
	var evs []histEvent
	for _, w := range writes {
		prev, existed := next[w.key]
		var ev histEvent
		switch {
		case w.del && !existed:
			continue
		case w.del:
			ev = histEvent{key: w.key, entry: histEntry{m: revision.Meta{Mod: rev}}, deleted: true}
			delete(next, w.key)
		default:
			ev = histEvent{key: w.key, entry: histEntry{value: w.value, m: prev.m.Next(rev, 0)}}
			next[w.key] = ev.entry
		}
		if existed {
			p := prev
			ev.prev = &p
		}
		if err := u.RecordHistory([]byte(ev.key), []byte(ev.entry.value), ev.entry.m, ev.deleted); err != nil {
			return false, err
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		return false, nil
	}
	hm.states = append(hm.states, next)
	hm.events = append(hm.events, evs...)
	return true, u.SetRevision(rev)
}

// randomWrites is one revision's writes: 1 to 3 distinct keys of keys,
// each put or (one time in four) deleted.
func randomWrites(rng *rand.Rand, keys []string) []histWrite {
	n := 1 + rng.IntN(min(3, len(keys)))
	perm := rng.Perm(len(keys))[:n]
	var ws []histWrite
	for _, i := range perm {
		ws = append(ws, histWrite{key: keys[i], value: fmt.Sprintf("v%d", rng.IntN(1000)), del: rng.IntN(4) == 0})
	}
	return ws
}

// awkwardKeys are keys whose escaping matters: 0x00 and 0xff bytes, and
// keys that are prefixes of others.
var awkwardKeys = []string{"a", "a\x00", "a\x00\x00", "a\x00b", "a\x01", "ab", "b", "\x00", "\x00\xff", "\xff", "\xff\x00", "k\x00\x01", "k"}

// rangeModel is the model's answer to RangeAt(start, end, rev).
func rangeModel(state map[string]histEntry, start, end string) []string {
	var keys []string
	for k := range state {
		if k >= start && (end == "" || k < end) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys) // bytewise, as the store orders keys
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%q=%s %+v", k, state[k].value, state[k].m))
	}
	return out
}

func rangeStore(s *Store, start, end string, rev uint64) ([]string, uint64, error) {
	var out []string
	at, err := s.RangeAt([]byte(start), []byte(end), rev, func(k, v []byte, m revision.Meta) bool {
		out = append(out, fmt.Sprintf("%q=%s %+v", k, v, m))
		return true
	})
	return out, at, err
}

// writeHistory records n revisions of random writes to keys.
func writeHistory(t testing.TB, s *Store, hm *histModel, rng *rand.Rand, keys []string, n int) {
	t.Helper()
	for i := 0; i < n; {
		u := s.NewUpdate()
		ok, err := hm.record(u, randomWrites(rng, keys))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			u.Close()
			continue
		}
		if err := u.Commit(false); err != nil {
			t.Fatal(err)
		}
		i++
	}
}

func compactTo(t testing.TB, s *Store, rev uint64) {
	t.Helper()
	commit(t.(*testing.T), s, func(u *Update) error { return u.Compact(rev) })
}

// checkRangeAt compares RangeAt with the model at every revision from lo
// to the latest, over several ranges, including bounds that are proper
// prefixes of keys and bounds holding 0x00.
func checkRangeAt(t *testing.T, s *Store, hm *histModel, lo uint64) {
	t.Helper()
	bounds := [][2]string{{"", ""}, {"a", "b"}, {"a\x00", "a\x01"}, {"a\x00", ""}, {"\x00", "a"}, {"", "a\x00"}, {"k", "k\x00\x02"}, {"b", "\xff"}, {"b", "a"}, {"a", "a"}}
	for rev := lo; rev <= hm.rev(); rev++ {
		for _, b := range bounds {
			got, at, err := rangeStore(s, b[0], b[1], rev)
			if err != nil || at != rev {
				t.Fatalf("RangeAt(%q, %q, %d) = at %d, %v", b[0], b[1], rev, at, err)
			}
			if want := rangeModel(hm.state(rev), b[0], b[1]); !slices.Equal(got, want) {
				t.Fatalf("RangeAt(%q, %q, %d):\n got %q\nwant %q", b[0], b[1], rev, got, want)
			}
		}
	}
}

func TestRangeAtAnswersEveryRevision(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	hm := newHistModel()
	writeHistory(t, s, hm, rand.New(rand.NewPCG(1, 2)), awkwardKeys, 300)
	if got := s.Revision(); got != 300 {
		t.Fatalf("Revision = %d, want 300", got)
	}
	checkRangeAt(t, s, hm, 1)
	got, at, err := rangeStore(s, "", "", 0)
	if err != nil || at != 300 || !slices.Equal(got, rangeModel(hm.state(300), "", "")) {
		t.Fatalf("RangeAt(latest) = at %d, %v: %q", at, err, got)
	}
}

func TestRangeAtRefusesCompactedAndFutureRevisions(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	hm := newHistModel()
	writeHistory(t, s, hm, rand.New(rand.NewPCG(3, 4)), awkwardKeys, 20)
	compactTo(t, s, 10)
	for _, tc := range []struct {
		rev  uint64
		want error
	}{
		{9, errs.ErrCompacted},
		{1, errs.ErrCompacted},
		{10, nil}, // the compaction revision itself is readable, as in etcd
		{20, nil},
		{0, nil},
		{21, errs.ErrFutureRevision},
	} {
		_, _, err := rangeStore(s, "", "", tc.rev)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("RangeAt at %d: %v, want %v", tc.rev, err, tc.want)
		}
	}
}

func TestCompactRefusals(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	hm := newHistModel()
	writeHistory(t, s, hm, rand.New(rand.NewPCG(5, 6)), awkwardKeys, 10)
	compactTo(t, s, 5)
	for _, tc := range []struct {
		rev  uint64
		want error
	}{
		{11, errs.ErrFutureRevision},
		{5, errs.ErrCompacted},
		{4, errs.ErrCompacted},
		{6, nil},
		{10, nil},
	} {
		u := s.NewUpdate()
		err := u.Compact(tc.rev)
		u.Close()
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("Compact(%d) = %v, want %v", tc.rev, err, tc.want)
		}
	}
	if got := s.CompactRevision(); got != 5 {
		t.Fatalf("CompactRevision = %d after abandoned Updates, want 5", got)
	}
	u := s.NewUpdate()
	defer u.Close()
	if err := u.RecordHistory([]byte("a"), nil, revision.Meta{Mod: 5}, false); err == nil {
		t.Fatal("RecordHistory at the compaction revision accepted")
	}
	if err := u.SetRevision(9); err == nil {
		t.Fatal("SetRevision went back from 10 to 9")
	}
}

// changesModel is the model's answer to Changes(from) read at revision to.
func changesModel(hm *histModel, from, to uint64) []string {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	var out []string
	for _, ev := range hm.events {
		if ev.entry.m.Mod >= from && ev.entry.m.Mod <= to {
			out = append(out, eventString(ev.key, ev.entry.value, ev.entry.m, ev.deleted, ev.prev))
		}
	}
	return out
}

func eventString(key, value string, m revision.Meta, deleted bool, prev *histEntry) string {
	s := fmt.Sprintf("%q=%s %+v del=%v", key, value, m, deleted)
	if prev != nil {
		s += fmt.Sprintf(" prev=%s %+v", prev.value, prev.m)
	}
	return s
}

func changesStore(s *Store, from uint64) ([]string, uint64, error) {
	var out []string
	at, err := s.Changes(from, func(ev Change) bool {
		var prev *histEntry
		if ev.HasPrev {
			prev = &histEntry{value: string(ev.PrevValue), m: ev.PrevMeta}
		}
		out = append(out, eventString(string(ev.Key), string(ev.Value), ev.Meta, ev.Deleted, prev))
		return true
	})
	return out, at, err
}

func TestChangesGivesEveryWriteWithItsPrevious(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	hm := newHistModel()
	writeHistory(t, s, hm, rand.New(rand.NewPCG(7, 8)), awkwardKeys, 200)
	checkChanges(t, s, hm, 0)
	compactTo(t, s, 120)
	if _, _, err := changesStore(s, 120); !errors.Is(err, errs.ErrCompacted) {
		t.Fatalf("Changes from the compaction revision: %v, want ErrCompacted", err)
	}
	if err := s.rs.comp.drain(); err != nil {
		t.Fatal(err)
	}
	checkChanges(t, s, hm, 121)
	if got, at, err := changesStore(s, 500); err != nil || at != 200 || len(got) != 0 {
		t.Fatalf("Changes from a future revision = %q at %d, %v", got, at, err)
	}
}

// checkChanges compares Changes with the model from every revision from
// lo on.
func checkChanges(t *testing.T, s *Store, hm *histModel, lo uint64) {
	t.Helper()
	for from := lo; from <= hm.rev()+1; from++ {
		got, at, err := changesStore(s, from)
		if err != nil || at != hm.rev() {
			t.Fatalf("Changes(%d): at %d, %v", from, at, err)
		}
		if want := changesModel(hm, from, at); !slices.Equal(got, want) {
			t.Fatalf("Changes(%d):\n got %q\nwant %q", from, got, want)
		}
	}
}

// TestChangesKeepsARevisionsWriteOrder: a transaction's events come in the
// order it wrote them, not in key order, as etcd's do.
func TestChangesKeepsARevisionsWriteOrder(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	hm := newHistModel()
	commit(t, s, func(u *Update) error {
		_, err := hm.record(u, []histWrite{{key: "z", value: "1"}, {key: "a", value: "2"}, {key: "m", value: "3"}})
		return err
	})
	var keys []string
	if _, err := s.Changes(1, func(ev Change) bool { keys = append(keys, string(ev.Key)); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"z", "a", "m"}) {
		t.Fatalf("events in order %q, want z a m", keys)
	}
}

// revRecords counts the records of the current generation's revision
// space by kind.
func revRecords(t testing.TB, s *Store) map[byte]int {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := map[byte]int{}
	lo := revGenPrefix(s.gen)
	for ok := it.SeekGE(lo); ok && bytes.HasPrefix(it.Key(), lo); ok = it.Next() {
		n[it.Key()[revKeyHeader]]++
	}
	return n
}

// TestCompactionDeletesWhatNoReadNeeds: once drained, the history holds,
// per key, its newest record at or below the compaction revision unless a
// tombstone, and everything above; nothing of revision order at or below.
// Repeated compactions leave no record of a key that a later write
// superseded (what an earlier pass kept is deleted by a later one).
func TestCompactionDeletesWhatNoReadNeeds(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	hm := newHistModel()
	rng := rand.New(rand.NewPCG(9, 10))
	for _, c := range []uint64{50, 90, 150, 151, 260} {
		writeHistory(t, s, hm, rng, awkwardKeys, int(c+10-hm.rev()))
		compactTo(t, s, c)
		if err := s.rs.comp.drain(); err != nil {
			t.Fatal(err)
		}
		checkRangeAt(t, s, hm, c)
		checkChanges(t, s, hm, c+1)
		// A key deleted at or below c and not written since: no record.
		// Every write kept has its index entry and its by-revision record.
		hist := keptWrites(hm, c)
		if n, ix := revRecords(t, s), s.IndexStats().Revisions; ix != hist || n[revOrder] != hist {
			t.Fatalf("compacted at %d: %d writes in the key index and %d by-revision records, want %d of each", c, ix, n[revOrder], hist)
		}
	}
}

// keptWrites is the number of writes a history compacted at c keeps: those
// above c, and each key's last at or below c unless it deleted the key.
func keptWrites(hm *histModel, c uint64) int {
	n := 0
	for _, ev := range hm.events {
		if ev.entry.m.Mod > c {
			n++
		}
	}
	for _, e := range hm.state(c) {
		if e.m.Mod <= c {
			n++
		}
	}
	return n
}

// TestRevisionsSurviveReopen: the store and compaction revisions and the
// history come back at Open, and a compaction cut short by a restart is
// finished by the reopened store.
func TestRevisionsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, 0)
	hm := newHistModel()
	writeHistory(t, s, hm, rand.New(rand.NewPCG(11, 12)), awkwardKeys, 100)
	s.rs.comp.close() // no physical compaction before the restart
	s.rs.comp = nil
	compactTo(t, s, 60)
	if n := revRecords(t, s); n[revOrder] != len(hm.events) {
		t.Fatalf("compaction ran with the compactor stopped: %d revision-order records", n[revOrder])
	}
	s.Close()
	s = openT(t, dir, 0)
	defer s.Close()
	if s.Revision() != 100 || s.CompactRevision() != 60 {
		t.Fatalf("reopened at revision %d, compacted at %d; want 100, 60", s.Revision(), s.CompactRevision())
	}
	kept := keptWrites(hm, 60)
	wait.For(t, "the reopened store's compactor to finish", func() bool {
		s.rs.comp.mu.Lock() // a batch is whole or not begun
		defer s.rs.comp.mu.Unlock()
		return revRecords(t, s)[revOrder] == kept && s.IndexStats().Revisions == kept
	})
	checkRangeAt(t, s, hm, 60)
	checkChanges(t, s, hm, 61)
}

// TestUpdateKeepsItsLastRevision: an Update whose entries move the store
// revision several times (SetRevision writes its record once, at the
// commit) leaves the last one, committed either way and in either raft log
// mode, for readers and across a restart.
func TestUpdateKeepsItsLastRevision(t *testing.T) {
	for _, tc := range []struct {
		name    string
		raftLog string
		commit  func(u *Update) error
	}{
		{"pebble/Commit", RaftLogPebble, func(u *Update) error { return u.Commit(true) }},
		{"pebble/CommitNoSyncWait", RaftLogPebble, func(u *Update) error {
			return errors.Join(u.CommitNoSyncWait(), u.SyncWait())
		}},
		{"wal/Commit", RaftLogWAL, func(u *Update) error { return u.Commit(true) }},
		{"wal/CommitNoSyncWait", RaftLogWAL, func(u *Update) error {
			return errors.Join(u.CommitNoSyncWait(), u.SyncWait())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{RaftLog: tc.raftLog, WALSegmentSize: testSegmentSize}
			s, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, revs := range [][]uint64{{1, 2, 3}, {4}, {5, 6}} {
				u := s.NewUpdate()
				for _, rev := range revs {
					m := revision.Meta{Create: 1, Mod: rev, Version: rev}
					if err := errors.Join(u.Put([]byte("k"), []byte{byte(rev)}, m), u.SetRevision(rev)); err != nil {
						t.Fatal(err)
					}
				}
				if err := tc.commit(u); err != nil {
					t.Fatal(err)
				}
				if got, want := s.Revision(), revs[len(revs)-1]; got != want {
					t.Fatalf("store revision %d after an Update ending at %d", got, want)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(dir, opts); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Revision() != 6 {
				t.Fatalf("reopened at store revision %d, want 6", s.Revision())
			}
		})
	}
}

// TestCompactionBatchIsBounded: one batch of the physical compaction
// deletes at most its bound of records, however many one key or one
// compaction releases (a hot key's thousand writes are spread over
// batches), and the batches together leave what a single pass would.
func TestCompactionBatchIsBounded(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	s.rs.comp.close() // the test runs the batches itself
	s.rs.comp = nil
	hm := newHistModel()
	rng := rand.New(rand.NewPCG(41, 42))
	writeHistory(t, s, hm, rng, []string{"hot"}, 1000)
	writeHistory(t, s, hm, rng, awkwardKeys, 300)
	compactTo(t, s, 1250)
	const bound = 64
	for batches := 0; ; batches++ {
		before := revRecords(t, s)[revOrder]
		more, err := s.compactBatch(bound)
		if err != nil {
			t.Fatal(err)
		}
		if n := before - revRecords(t, s)[revOrder]; n > bound {
			t.Fatalf("batch %d deleted %d history records, bound %d", batches, n, bound)
		}
		if !more {
			if batches < 1000/bound {
				t.Fatalf("a thousand records went in %d batches of at most %d", batches+1, bound)
			}
			break
		}
	}
	checkRangeAt(t, s, hm, 1250)
	checkChanges(t, s, hm, 1251)
}

// TestCompactorStopsAtAFault: after a storage fault a compaction batch
// writes nothing and fails with ErrFault, and the compactor's goroutine
// ends rather than retry (Close does not wait for a faulted store's).
func TestCompactorStopsAtAFault(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	s.rs.comp.close()
	s.rs.comp = nil
	hm := newHistModel()
	writeHistory(t, s, hm, rand.New(rand.NewPCG(51, 52)), awkwardKeys, 50)
	compactTo(t, s, 40)
	s.fault.trip(errors.New("injected: input/output error"))
	if _, err := s.compactBatch(10); !errors.Is(err, ErrFault) {
		t.Fatalf("compaction batch after a fault: %v, want ErrFault", err)
	}
	s.startCompactor(newLimitedLog(nil))
	wait.For(t, "the compactor to stop at the fault", func() bool {
		select {
		case <-s.rs.comp.done:
			return true
		default:
			return false
		}
	})
	if err := s.Close(); !errors.Is(err, ErrFault) {
		t.Fatalf("Close of a faulted store: %v", err)
	}
}

// TestUpdateRangeAtReadsThroughTheBatch: an Update reads the history as it
// sees it: the revisions it recorded itself, not yet committed, and its
// own compaction, whatever the compactor has deleted of the history
// below the committed one; the same answers as the model, as a read of
// the committed store gives once committed.
func TestUpdateRangeAtReadsThroughTheBatch(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	hm := newHistModel()
	rng := rand.New(rand.NewPCG(7, 8))
	writeHistory(t, s, hm, rng, awkwardKeys, 20)
	compactTo(t, s, 8)
	if err := s.rs.comp.drain(); err != nil {
		t.Fatal(err)
	}
	u := s.NewUpdate()
	defer u.Close()
	for hm.rev() < 22 {
		if _, err := hm.record(u, randomWrites(rng, awkwardKeys)); err != nil {
			t.Fatal(err)
		}
	}
	if err := u.Compact(10); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rev  uint64
		want error
	}{
		{8, errs.ErrCompacted}, // the Update's compaction, not the store's
		{10, nil},
		{15, nil},
		{21, nil}, // recorded by the Update
		{22, nil},
		{0, nil}, // the latest as the Update sees it: 22
		{23, errs.ErrFutureRevision},
	} {
		var got []string
		at, err := u.RangeAt([]byte("a"), nil, tc.rev, func(k, v []byte, m revision.Meta) bool {
			got = append(got, fmt.Sprintf("%q=%s %+v", k, v, m))
			return true
		})
		if tc.want != nil {
			if !errors.Is(err, tc.want) {
				t.Errorf("at %d: %v, want %v", tc.rev, err, tc.want)
			}
			continue
		}
		wantAt := tc.rev
		if wantAt == 0 {
			wantAt = 22
		}
		if want := rangeModel(hm.state(wantAt), "a", ""); err != nil || at != wantAt || !slices.Equal(got, want) {
			t.Errorf("at %d: read at %d, %v:\n got %q\nwant %q", tc.rev, at, err, got, want)
		}
	}
}

// TestCompactionWaitsForOlderViews: a view taken before a compaction was
// published reads its state whole while it is open, however far below the
// compaction it lies: the pass deletes nothing until the view closes, and
// then all it should.
func TestCompactionWaitsForOlderViews(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	s.rs.comp.close() // the test runs the batches itself
	s.rs.comp = nil
	hm, rng := newHistModel(), rand.New(rand.NewPCG(51, 52))
	writeHistory(t, s, hm, rng, awkwardKeys, 100)
	v, err := s.View()
	if err != nil {
		t.Fatal(err)
	}
	viewState := func() []string {
		var out []string
		if err := v.ForEach(func(k, val []byte, m revision.Meta) error {
			out = append(out, fmt.Sprintf("%q=%s %+v", k, val, m))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	rev, _ := v.Revisions()
	want := rangeModel(hm.state(rev), "", "")
	writeHistory(t, s, hm, rng, awkwardKeys, 60)
	compactTo(t, s, hm.rev()-10)
	records := revRecords(t, s)[revOrder]
	for range 3 {
		if more, err := s.compactBatch(limits.CompactBatch); err != nil || !more {
			t.Fatalf("a batch with an older view open: more %v, %v", more, err)
		}
	}
	if got := viewState(); !slices.Equal(got, want) {
		t.Fatalf("the view at %d after a compaction to %d:\n got %q\nwant %q", rev, hm.rev()-10, got, want)
	}
	if n := revRecords(t, s)[revOrder]; n != records {
		t.Fatalf("%d history records deleted with an older view open", records-n)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	for {
		more, err := s.compactBatch(limits.CompactBatch)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
	if n, kept := revRecords(t, s)[revOrder], keptWrites(hm, hm.rev()-10); n != kept {
		t.Fatalf("after the view closed: %d history records, want %d", n, kept)
	}
	checkRangeAt(t, s, hm, hm.rev()-10)
}
