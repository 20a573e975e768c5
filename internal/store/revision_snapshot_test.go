package store

import (
	"bytes"
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

// TestAddRevisionRefusesMalformedRecords: a revision-space record from a
// peer is staged only if it has the shape the readers decode.
func TestAddRevisionRefusesMalformedRecords(t *testing.T) {
	m := revision.Meta{Create: 3, Mod: 5, Version: 2}
	hk := func(key string, rev uint64) []byte { return appendHistKey(nil, 0, []byte(key), rev)[revKeyHeader:] }
	ok := appendHistValue(nil, m, []byte("v"), false)
	ow := func(key string, rev uint64) []byte { return appendOrderKey(nil, 0, rev, 0, []byte(key))[revKeyHeader:] }
	idx := appendIndexValue(nil, 3, false)
	for _, tc := range []struct {
		name     string
		key, raw []byte
		valid    bool
	}{
		{"revision", []byte{revRevision}, encodeU64(9), true},
		{"short revision", []byte{revRevision}, []byte{1}, false},
		{"compaction", []byte{revCompact}, encodeU64(4), true},
		{"revision with a suffix", []byte{revCompact, 0}, encodeU64(4), false},
		{"done cursor", []byte{revCursor}, compactCursor{pass: 6, state: cursorDone}.encode(), true},
		{"done cursor with a key", []byte{revCursor}, compactCursor{pass: 6, state: cursorDone, resume: hk("a", 3)[1:]}.encode(), false},
		{"cursor at a key", []byte{revCursor}, compactCursor{pass: 6, resume: hk("a\x00", 3)[1:]}.encode(), true},
		{"cursor in a key", []byte{revCursor}, compactCursor{pass: 6, state: cursorInGroup, resume: hk("a", 3)[1:]}.encode(), true},
		{"cursor at no key", []byte{revCursor}, compactCursor{pass: 6, resume: []byte("a")}.encode(), false},
		{"cursor in an unknown state", []byte{revCursor}, compactCursor{pass: 6, state: 7, resume: hk("a", 3)[1:]}.encode(), false},
		{"cursor of 8 bytes", []byte{revCursor}, encodeU64(6), false},
		{"index entry", hk("a\x00b", 5), idx, true},
		{"index entry of a tombstone", hk("a", 5), appendIndexValue(nil, 0, true), true},
		{"index entry with a value", hk("a", 5), ok, false},
		{"index entry at revision 0", hk("a", 0), idx, false},
		{"index entry of the empty key", hk("", 5), idx, false},
		{"unescaped 0x00", append([]byte{revHistory, 'a', 0, 'b'}, hk("", 5)[1:]...), idx, false},
		{"no terminator", hk("a", 5)[:len(hk("a", 5))-9], idx, false},
		{"index entry with bad flags", hk("a", 5), append([]byte{7}, idx[1:]...), false},
		{"short index entry", hk("a", 5), idx[:3], false},
		{"history", ow("k", 5), ok, true},
		{"tombstone", ow("k", 5), appendHistValue(nil, m, nil, true), true},
		{"tombstone with a value", ow("k", 5), append(appendHistValue(nil, m, nil, true), 'x'), false},
		{"history at another revision than its Meta", ow("k", 6), ok, false},
		{"history without a value", ow("k", 5), nil, false},
		{"bad flags", ow("k", 5), append([]byte{7}, ok[1:]...), false},
		{"short history value", ow("k", 5), ok[:10], false},
		{"history without a key", ow("", 5), ok, false},
		{"unknown kind", []byte{'z'}, nil, false},
		{"empty", nil, nil, false},
	} {
		s := openT(t, t.TempDir(), 0)
		st := s.NewStaged(1, 1)
		err := st.AddRevision(tc.key, tc.raw)
		if (err == nil) != tc.valid || (err != nil && !errors.Is(err, ErrCorrupt)) {
			t.Errorf("%s: AddRevision = %v, want valid %v", tc.name, err, tc.valid)
		}
		st.Discard()
		s.Close()
	}
}

// FuzzRevisionRecord: whatever AddRevision's check admits, the readers
// decode without error, and a history key re-encodes to itself.
func FuzzRevisionRecord(f *testing.F) {
	m := revision.Meta{Create: 3, Mod: 5, Version: 2}
	f.Add(appendHistKey(nil, 0, []byte("a\x00b"), 5)[revKeyHeader:], appendIndexValue(nil, 2, false))
	f.Add(appendOrderKey(nil, 0, 5, 0, []byte("k"))[revKeyHeader:], appendHistValue(nil, m, []byte("v"), false))
	f.Add([]byte{revCursor}, compactCursor{pass: 6, state: cursorInGroup, resume: []byte("a\x00\x01\x00\x00\x00\x00\x00\x00\x00\x03")}.encode())
	f.Add([]byte{revRevision}, encodeU64(6))
	f.Fuzz(func(t *testing.T, key, raw []byte) {
		if !validRevisionRecord(key, raw) {
			return
		}
		if key[0] == revCursor {
			if c, _ := decodeCursor(raw); !bytes.Equal(c.encode(), raw) {
				t.Fatalf("cursor %x re-encodes as %x", raw, c.encode())
			}
		}
		if key[0] == revOrder {
			if _, _, _, err := decodeHistValue(raw); err != nil {
				t.Fatal(err)
			}
		}
		if key[0] != revHistory {
			return
		}
		esc, rev, ok := splitHistKey(key[1:])
		if !ok {
			t.Fatal("admitted history key does not split")
		}
		k, ok := unescape(nil, esc)
		if !ok {
			t.Fatal("admitted history key does not unescape")
		}
		if back := appendHistKey(nil, 0, k, rev)[revKeyHeader:]; !bytes.Equal(back, key) {
			t.Fatalf("history key %x re-encodes as %x", key, back)
		}
		if _, _, err := decodeIndexValue(raw); err != nil {
			t.Fatal(err)
		}
	})
}
