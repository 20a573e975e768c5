package store

import (
	"errors"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

// TestUpdateGetSeesOwnWrites: a transaction applied in an Update reads the
// state as the batch has it so far (earlier entries of the same Ready
// included), and what it read is a copy the batch cannot change.
func TestUpdateGetSeesOwnWrites(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	commit(t, s, func(u *Update) error { return u.Put([]byte("a"), []byte("committed"), mod(3)) })
	u := s.NewUpdate()
	defer u.Close()
	check := func(key, val string, version uint64, ok bool) []byte {
		t.Helper()
		v, m, found, err := u.Get([]byte(key))
		if err != nil || found != ok || string(v) != val || m.Mod != version {
			t.Fatalf("Get(%s) = %q,%d,%v,%v; want %q,%d,%v", key, v, m.Mod, found, err, val, version, ok)
		}
		return v
	}
	first := check("a", "committed", 3, true)
	check("b", "", 0, false)
	errs := errors.Join(u.Put([]byte("a"), []byte("pending"), mod(5)), u.Put([]byte("b"), []byte("new"), mod(5)))
	if errs != nil {
		t.Fatal(errs)
	}
	check("a", "pending", 5, true)
	check("b", "new", 5, true)
	if string(first) != "committed" {
		t.Fatalf("a value read earlier changed to %q under a later write", first)
	}
	if _, err := u.Delete([]byte("a"), 6); err != nil {
		t.Fatal(err)
	}
	check("a", "", 0, false)
	// Nothing is visible outside the Update before it commits.
	if v, m, ok, err := s.Get([]byte("a")); err != nil || !ok || string(v) != "committed" || m.Mod != 3 {
		t.Fatalf("store Get(a) = %q,%d,%v,%v before commit", v, m.Mod, ok, err)
	}
}

// mod is the metadata of a key written once, at revision v.
func mod(v uint64) revision.Meta { return revision.Meta{Create: v, Mod: v, Version: 1} }
