package store

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvd-project/kvd/internal/kvdtest/fixture"
	"github.com/kvd-project/kvd/internal/revision"
)

// untarFixture unpacks a data directory written by the build from before
// revisions (internal/store/testdata/README.md says how it was made).
func untarFixture(t *testing.T) string {
	return filepath.Join(fixture.Untar(t, "testdata/format1-datadir.tar.gz"), "data")
}

// laterFixtureKeys are the keys the fixtures of formats 3 and 6 end with
// (their recipes share their first eight revisions).
var laterFixtureKeys = map[string]string{
	"alpha":     "three c5 m5 v1 lease=false",
	"beta":      "two-thrice c2 m7 v3 lease=false",
	"svc/node1": "10.0.0.1 c6 m6 v1 lease=true",
	"x":         "1 c8 m8 v1 lease=false",
	"y":         "2 c8 m8 v1 lease=false",
}

// migrationFixtures are the data directories of older builds
// (testdata/README.md) and what they hold.
var migrationFixtures = []struct {
	fixture string
	keys    map[string]string
	rev     uint64
	at      map[uint64][]string // reads at past revisions
	from    uint64              // changes from
	changes []string
}{{
	fixture: "testdata/format2-datadir.tar.gz",
	keys: map[string]string{
		"alpha":     "three c5 m5 v1 lease=false",
		"beta":      "two-again c2 m3 v2 lease=false",
		"svc/node1": "10.0.0.1 c6 m6 v1 lease=true",
	},
	rev:     6,
	at:      map[uint64][]string{2: {"alpha=one", "beta=two"}, 4: {"beta=two-again"}},
	from:    3,
	changes: []string{"3 put beta=two-again prev=two", "4 del alpha prev=one", "5 put alpha=three", "6 put svc/node1=10.0.0.1"},
}, {
	fixture: "testdata/format3-datadir.tar.gz",
	keys:    laterFixtureKeys,
	rev:     8, // a transaction's two writes
	at: map[uint64][]string{
		3: {"alpha=one", "beta=two-again"}, // kept at the compaction (3)
		5: {"alpha=three", "beta=two-again"},
	},
	from:    4,
	changes: []string{"4 del alpha prev=one", "5 put alpha=three", "6 put svc/node1=10.0.0.1", "7 put beta=two-thrice prev=two-again", "8 put x=1", "8 put y=2"},
}, {
	fixture: "testdata/format6-datadir.tar.gz",
	keys:    laterFixtureKeys,
	rev:     10, // a key written and deleted last
	at: map[uint64][]string{
		3: {"alpha=one", "beta=two-again"},
		9: {"alpha=three", "beta=two-thrice", "gone=soon", "svc/node1=10.0.0.1", "x=1", "y=2"},
	},
	from: 4,
	changes: []string{"4 del alpha prev=one", "5 put alpha=three", "6 put svc/node1=10.0.0.1", "7 put beta=two-thrice prev=two-again",
		"8 put x=1", "8 put y=2", "9 put gone=soon", "10 del gone prev=soon"},
}}

// TestOpenMigratesOlderFormats: a data directory of format 2, 3 or 6,
// written by an older build, opens: its format becomes DataFormat and its
// keys, their metadata, their history (reads at past revisions, changes
// with their previous values) read as that build wrote them, those kept
// at a compaction included. A migration begun again (a crash before the
// format was recorded) finds the history rewritten and leaves it so; the records kept by key are gone.
func TestOpenMigratesOlderFormats(t *testing.T) {
	for _, tc := range migrationFixtures {
		t.Run(filepath.Base(tc.fixture), func(t *testing.T) {
			dir := filepath.Join(fixture.Untar(t, tc.fixture), "data")
			// 1: a migration begun again; 2: format 4 and 3: format 5,
			// recorded as this build's as they are; 4: this build's. Round 1 also moves
			// the raft log to a WAL, which later rounds keep: the log
			// reads the same throughout.
			var log0 logState
			for round, raftLog := range []string{RaftLogPebble, RaftLogWAL, RaftLogWAL, RaftLogWAL, RaftLogWAL} {
				s, err := Open(dir, Options{RaftLog: raftLog})
				if err != nil {
					t.Fatalf("Open %d: %v", round, err)
				}
				if got := readLogState(t, s); round == 0 {
					log0 = got
				} else if !got.equal(log0) || s.RaftLog() != raftLog {
					t.Fatalf("Open %d: log %+v in %s, want %+v in %s", round, got, s.RaftLog(), log0, raftLog)
				}
				if raw, ok, err := s.getRaw(keyFormat); err != nil || !ok || string(raw) != string(encodeU64(DataFormat)) {
					t.Fatalf("format key = %x, %v, %v; want %d", raw, ok, err, DataFormat)
				}
				checkMigrated(t, s, tc.keys, tc.rev, tc.at, tc.from, tc.changes)
				if n, h := countKeys(t, s.db, kvStart, kvEnd), s.holdsHistoryIndex(s.gen); n != 0 || h {
					t.Fatalf("Open %d: %d state records and history index entries %v left by key", round, n, h)
				}
				switch round {
				case 0:
					err = s.setSynced(keyFormat, encodeU64(DataFormatValueByKey))
				case 1:
					err = s.setSynced(keyFormat, encodeU64(DataFormatHistoryByRevision))
				case 2:
					err = s.setSynced(keyFormat, encodeU64(DataFormatPastRangeTxn))
				}
				if err := errors.Join(err, s.Close()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func checkMigrated(t *testing.T, s *Store, keys map[string]string, rev uint64, at map[uint64][]string, from uint64, changes []string) {
	t.Helper()
	got := map[string]string{}
	if _, _, err := s.Scan(nil, nil, func(k, v []byte, m revision.Meta) bool {
		got[string(k)] = fmt.Sprintf("%s c%d m%d v%d lease=%t", v, m.Create, m.Mod, m.Version, m.Lease != 0)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, keys) || s.Revision() != rev {
		t.Fatalf("keys %v at revision %d; want %v at %d", got, s.Revision(), keys, rev)
	}
	for r, want := range at {
		var kvs []string
		if _, err := s.RangeAt(nil, nil, r, func(k, v []byte, _ revision.Meta) bool {
			kvs = append(kvs, string(k)+"="+string(v))
			return true
		}); err != nil || !slices.Equal(kvs, want) {
			t.Fatalf("at revision %d: %v, %v; want %v", r, kvs, err, want)
		}
	}
	var evs []string
	if _, err := s.Changes(from, func(ev Change) bool {
		e := fmt.Sprintf("%d put %s=%s", ev.Meta.Mod, ev.Key, ev.Value)
		if ev.Deleted {
			e = fmt.Sprintf("%d del %s", ev.Meta.Mod, ev.Key)
		}
		if ev.HasPrev {
			e += " prev=" + string(ev.PrevValue)
		}
		evs = append(evs, e)
		return true
	}); err != nil || !slices.Equal(evs, changes) {
		t.Fatalf("changes from %d: %q, %v; want %q", from, evs, err, changes)
	}
}

// TestOpenRefusesDataOfAnOlderBuild: a data directory the previous build
// wrote (raft state and keys, no data format) is refused with the way
// forward, not misread.
func TestOpenRefusesDataOfAnOlderBuild(t *testing.T) {
	dir := untarFixture(t)
	s, err := Open(dir, Options{WALSegmentSize: testSegmentSize})
	if err == nil {
		s.Close()
		t.Fatal("Open took a directory of data format 1")
	}
	var fe *FormatError
	if !errors.Is(err, ErrDataFormat) || !errors.As(err, &fe) || fe.Found != DataFormatNoRevisions {
		t.Fatalf("err = %v; want a FormatError of format %d", err, DataFormatNoRevisions)
	}
	for _, want := range []string{dir, "older kvd (data format 1)", fmt.Sprintf("needs format %d", DataFormat), "kvctl snapshot save", "kvd --restore", "docs/upgrading.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// Refused, the directory is left as it was: the older build still
	// opens it (the format key was not written).
	s2, err := Open(dir, Options{WALSegmentSize: testSegmentSize})
	if !errors.Is(err, ErrDataFormat) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Open: err = %v; still want ErrDataFormat", err)
	}
}

// TestOpenRecordsTheDataFormat: a new store records this build's format
// and opens again; a store of a newer format is refused as such.
func TestOpenRecordsTheDataFormat(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, 0)
	raw, ok, err := s.getRaw(keyFormat)
	if err != nil || !ok || string(raw) != string(encodeU64(DataFormat)) {
		t.Fatalf("format key = %x, %v, %v; want %d", raw, ok, err, DataFormat)
	}
	commit(t, s, func(u *Update) error { return u.Append(ents(1, 3, 1)) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, 0) // has state and its format: opens
	if err := s.setSynced(keyFormat, encodeU64(DataFormat+1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{WALSegmentSize: testSegmentSize})
	if err == nil {
		s.Close()
		t.Fatal("Open took a directory of a newer data format")
	}
	if !errors.Is(err, ErrDataFormat) || !strings.Contains(err.Error(), fmt.Sprintf("written by a newer kvd (data format %d)", DataFormat+1)) {
		t.Fatalf("err = %v; want a newer-format refusal", err)
	}
}

// TestMigrationRefusesAStateTheHistoryLacks: a format-6 directory whose
// history lacks a write its state records hold is refused at Open as
// corrupt, and left as it was: the migration drops nothing it has not
// found again in the history.
func TestMigrationRefusesAStateTheHistoryLacks(t *testing.T) {
	dir := filepath.Join(fixture.Untar(t, "testdata/format6-datadir.tar.gz"), "data")
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gen := uint64(1)
	if raw, c, err := db.Get(keyGen); err == nil {
		gen, _ = decodeU64(raw)
		c.Close()
	}
	// x's write, the first of revision 8.
	if err := db.Delete(appendOrderKey(nil, gen, 8, 0, []byte("x")), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	states := countKeys(t, db, kvStart, kvEnd)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(dir, Options{RaftLog: RaftLogPebble}); !errors.Is(err, ErrCorrupt) || !strings.Contains(fmt.Sprint(err), `"x"`) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open = %v, want ErrCorrupt naming x", err)
	}
	db, err = pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	raw, c, err := db.Get(keyFormat)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if f, _ := decodeU64(raw); f != DataFormatByKey || countKeys(t, db, kvStart, kvEnd) != states {
		t.Fatalf("after the refusal: format %d and %d state records, want %d and %d", f, countKeys(t, db, kvStart, kvEnd), DataFormatByKey, states)
	}
}
