package store

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

// TestSnapshotCarriesRevisionSpace: a store built from another's
// checkpoint (taken mid-way through a physical compaction) answers
// Revision, CompactRevision, RangeAt and Changes as its source does, keeps
// nothing of its own earlier history or of an abandoned transfer, and
// still does after a restart and after finishing the compaction.
func TestSnapshotCarriesRevisionSpace(t *testing.T) {
	src := openT(t, t.TempDir(), 0)
	defer src.Close()
	commit(t, src, func(u *Update) error { return errors.Join(u.Append(ents(1, 5, 2)), u.SetApplied(5)) })
	hm := newHistModel()
	writeHistory(t, src, hm, rand.New(rand.NewPCG(31, 32)), awkwardKeys, 200)
	src.rs.comp.close() // the test runs the compaction's batches itself
	src.rs.comp = nil
	compactTo(t, src, 120)
	if _, err := src.compactBatch(40); err != nil { // part of it
		t.Fatal(err)
	}
	snap, err := src.CreateSnapshot(0)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	dst := openT(t, dir, 0)
	writeHistory(t, dst, newHistModel(), rand.New(rand.NewPCG(33, 34)), []string{"stale", "a", "b"}, 300)
	abandoned := dst.NewStaged(99, 9)
	if err := errors.Join(abandoned.AddRevision([]byte{revRevision}, encodeU64(7)), abandoned.Finish()); err != nil {
		t.Fatal(err)
	}
	cp := src.Checkpoint()
	st := dst.NewStaged(cp.Index(), cp.Term())
	err = errors.Join(cp.ForEach(st.Add), cp.ForEachLease(st.AddLease), cp.ForEachRevision(st.AddRevision), st.Finish())
	cp.Release()
	if err != nil {
		t.Fatal(err)
	}
	if dst.Revision() != 300 {
		t.Fatalf("staged data visible before install: revision %d", dst.Revision())
	}
	u := dst.NewUpdate()
	if err := errors.Join(u.InstallSnapshot(snap, st), u.Commit(true)); err != nil {
		t.Fatal(err)
	}
	sameHistory(t, src, dst, hm)
	dst.Close()
	dst = openT(t, dir, 0)
	defer dst.Close()
	sameHistory(t, src, dst, hm)
	dst.rs.comp.mu.Lock() // no compaction batch between the two counts
	all, cur := countKeys(t, dst.db, revStart, revEnd), countKeys(t, dst.db, revGenPrefix(dst.gen), revGenEnd(dst.gen))
	dst.rs.comp.mu.Unlock()
	if all != cur {
		t.Fatalf("%d revision-space records on disk, %d of the current generation (stray generations left)", all, cur)
	}
	if err := dst.rs.comp.drain(); err != nil {
		t.Fatal(err)
	}
	sameHistory(t, src, dst, hm)
}

// sameHistory checks that dst answers as src does, and as the model.
func sameHistory(t *testing.T, src, dst *Store, hm *histModel) {
	t.Helper()
	if dst.Revision() != src.Revision() || dst.CompactRevision() != src.CompactRevision() {
		t.Fatalf("revision %d compacted at %d; the source's %d, %d",
			dst.Revision(), dst.CompactRevision(), src.Revision(), src.CompactRevision())
	}
	for rev := src.CompactRevision(); rev <= src.Revision(); rev++ {
		a, _, err1 := rangeStore(src, "", "", rev)
		b, _, err2 := rangeStore(dst, "", "", rev)
		if err := errors.Join(err1, err2); err != nil || !slices.Equal(a, b) {
			t.Fatalf("RangeAt at %d: %v\nsource %q\n  copy %q", rev, err, a, b)
		}
	}
	checkRangeAt(t, dst, hm, dst.CompactRevision())
	checkChanges(t, dst, hm, dst.CompactRevision()+1)
}

// TestAddRefusesMalformedRecords: a history or revision record from a
// peer is staged only if it has the shape the readers decode, and only
// by the call that takes its kind (Add: history; AddRevision: the rest).
func TestAddRefusesMalformedRecords(t *testing.T) {
	m := revision.Meta{Create: 3, Mod: 5, Version: 2}
	hk := func(key string, rev uint64) []byte { return appendHistKey(nil, 0, []byte(key), rev)[revKeyHeader:] }
	ok := appendHistValue(nil, m, []byte("v"), false)
	ow := func(key string, rev uint64) []byte { return appendOrderKey(nil, 0, rev, 0, []byte(key))[revKeyHeader:] }
	idx := appendIndexValue(nil, 3, false)
	for _, tc := range []struct {
		name     string
		history  bool // Add's, else AddRevision's
		key, raw []byte
		valid    bool
	}{
		{"revision", false, []byte{revRevision}, encodeU64(9), true},
		{"short revision", false, []byte{revRevision}, []byte{1}, false},
		{"compaction", false, []byte{revCompact}, encodeU64(4), true},
		{"revision with a suffix", false, []byte{revCompact, 0}, encodeU64(4), false},
		{"a cursor (format 6)", false, []byte{revCursor}, encodeU64(6), false},
		{"an index entry (format 6)", false, hk("a\x00b", 5), idx, false},
		{"history as a revision record", false, ow("k", 5), ok, false},
		{"history", true, ow("k", 5)[1:], ok, true},
		{"tombstone", true, ow("k", 5)[1:], appendHistValue(nil, m, nil, true), true},
		{"tombstone with a value", true, ow("k", 5)[1:], append(appendHistValue(nil, m, nil, true), 'x'), false},
		{"history at another revision than its Meta", true, ow("k", 6)[1:], ok, false},
		{"history without a value", true, ow("k", 5)[1:], nil, false},
		{"bad flags", true, ow("k", 5)[1:], append([]byte{7}, ok[1:]...), false},
		{"short history value", true, ow("k", 5)[1:], ok[:10], false},
		{"history without a key", true, ow("", 5)[1:], ok, false},
		{"revision as history", true, []byte{revRevision}, encodeU64(9), false},
		{"unknown kind", false, []byte{'z'}, nil, false},
		{"empty", false, nil, nil, false},
		{"empty history", true, nil, nil, false},
	} {
		s := openT(t, t.TempDir(), 0)
		st := s.NewStaged(1, 1)
		add := st.AddRevision
		if tc.history {
			add = st.Add
		}
		err := add(tc.key, tc.raw)
		if (err == nil) != tc.valid || (err != nil && !errors.Is(err, ErrCorrupt)) {
			t.Errorf("%s: = %v, want valid %v", tc.name, err, tc.valid)
		}
		st.Discard()
		s.Close()
	}
}

// FuzzRevisionRecord: whatever the staging checks admit, the readers
// decode without error.
func FuzzRevisionRecord(f *testing.F) {
	m := revision.Meta{Create: 3, Mod: 5, Version: 2}
	f.Add(appendOrderKey(nil, 0, 5, 0, []byte("k"))[revKeyHeader+1:], appendHistValue(nil, m, []byte("v"), false))
	f.Add([]byte{revRevision}, encodeU64(6))
	f.Fuzz(func(t *testing.T, key, raw []byte) {
		if validOrderRecord(key, raw) {
			if _, _, _, err := decodeHistValue(raw); err != nil {
				t.Fatal(err)
			}
			if _, _, _, ok := splitOrderKey(key); !ok {
				t.Fatal("admitted history key does not split")
			}
		}
		if validRevisionRecord(key, raw) {
			if _, err := decodeU64(raw); err != nil {
				t.Fatal(err)
			}
		}
	})
}
