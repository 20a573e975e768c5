package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/revision"
)

// TestRestoreStartsAtTheBackupsRevision: a restored store is at the
// backup's revision, with each key's Meta as the backup had it; a read at
// that revision answers it, one below fails as compacted (the backup has
// no history before it), and the next write takes the next revision.
func TestRestoreStartsAtTheBackupsRevision(t *testing.T) {
	s, err := Open(t.TempDir(), Options{WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys := map[string]revision.Meta{
		"a": {Create: 2, Mod: 9, Version: 4},
		"b": {Create: 5, Mod: 5, Version: 1},
		"c": {Create: 5, Mod: 5, Version: 1}, // written by one transaction with b
	}
	err = s.Restore(30, 12, []Member{{ID: 1, Addr: "a:1"}}, nil, func(add func(key, value []byte, m revision.Meta) error) error {
		for _, k := range []string{"a", "b", "c"} {
			if err := add([]byte(k), []byte("v"+k), keys[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Revision() != 12 || s.CompactRevision() != 12 {
		t.Fatalf("revision %d compacted at %d, want 12 and 12", s.Revision(), s.CompactRevision())
	}
	got := map[string]string{}
	at, err := s.RangeAt(nil, nil, 12, func(k, v []byte, m revision.Meta) bool {
		got[string(k)] = fmt.Sprintf("%s %+v", v, m)
		return true
	})
	if err != nil || at != 12 || len(got) != 3 || got["a"] != fmt.Sprintf("va %+v", keys["a"]) {
		t.Fatalf("read at 12: %v at %d, %v", got, at, err)
	}
	if _, err := s.RangeAt(nil, nil, 11, func([]byte, []byte, revision.Meta) bool { return true }); !errors.Is(err, errs.ErrCompacted) {
		t.Fatalf("read at 11: %v, want ErrCompacted", err)
	}
	u := s.NewUpdate()
	m, err := u.Meta([]byte("a"))
	if err == nil {
		err = u.Put([]byte("a"), []byte("new"), m.Next(u.Revision()+1, 0))
	}
	if err = errors.Join(err, u.SetRevision(13), u.SetApplied(31), u.Commit(true)); err != nil {
		t.Fatal(err)
	}
	if v, m, _, _ := s.Get([]byte("a")); string(v) != "new" || m != (revision.Meta{Create: 2, Mod: 13, Version: 5}) {
		t.Fatalf("a after the next write: %q %+v", v, m)
	}
}

// TestStagedRefusesAValueWithoutMeta: a snapshot's history record (from
// the network) too short to hold its revision metadata is refused, not
// staged for readers to fail on.
func TestStagedRefusesAValueWithoutMeta(t *testing.T) {
	s, err := Open(t.TempDir(), Options{WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := s.NewStaged(5, 1)
	defer st.Discard()
	k, raw := histRecord([]byte("k"), nil, revision.Meta{Create: 1, Mod: 1, Version: 1})
	if err := st.Add(k, raw[:revision.Size]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a value of %d bytes: %v, want ErrCorrupt", revision.Size, err)
	}
	if err := st.Add(k, raw); err != nil {
		t.Fatal(err)
	}
}
