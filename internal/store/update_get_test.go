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

// TestUpdateReadsWritesMadeBeforeItsFirstRead: an Update's writes made
// before it first reads through its batch (which is indexed only then)
// are seen by that read, whichever read it is, and so are those after.
func TestUpdateReadsWritesMadeBeforeItsFirstRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(u *Update, key string) (value string, found bool, err error)
	}{
		{"Get", func(u *Update, key string) (string, bool, error) {
			v, _, ok, err := u.Get([]byte(key))
			return string(v), ok, err
		}},
		{"Range", func(u *Update, key string) (value string, found bool, err error) {
			err = u.Range([]byte(key), append([]byte(key), 0), func(_, v []byte, _ revision.Meta) bool {
				value, found = string(v), true
				return false
			})
			return value, found, err
		}},
		{"RangeAt", func(u *Update, key string) (value string, found bool, err error) {
			_, err = u.RangeAt([]byte(key), append([]byte(key), 0), 0, func(_, v []byte, _ revision.Meta) bool {
				value, found = string(v), true
				return false
			})
			return value, found, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openT(t, t.TempDir(), 0)
			defer s.Close()
			u := s.NewUpdate()
			defer u.Close()
			if err := errors.Join(u.Put([]byte("a"), []byte("first"), mod(1)), u.SetRevision(1)); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := tc.read(u, "a"); err != nil || !ok || v != "first" {
				t.Fatalf("first read of a = %q,%v,%v; want the Update's write", v, ok, err)
			}
			if err := errors.Join(u.Put([]byte("b"), []byte("second"), mod(2)), u.SetRevision(2)); err != nil {
				t.Fatal(err)
			}
			for key, want := range map[string]string{"a": "first", "b": "second"} {
				if v, ok, err := tc.read(u, key); err != nil || !ok || v != want {
					t.Fatalf("read of %s = %q,%v,%v; want %q", key, v, ok, err, want)
				}
			}
		})
	}
}
