package store

import (
	"errors"
	"slices"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

// TestLeaseRecords: attach, detach and revoke keep the lease's key count
// and the key→lease index in step; a revoke deletes exactly the lease's
// keys; the leases survive a reopen.
func TestLeaseRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	u := s.NewUpdate()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(u.SetLease(Lease{ID: 1, TTL: 5}))
	must(u.SetLease(Lease{ID: 2, TTL: 7}))
	for _, k := range []string{"a", "b", "c"} {
		must(u.Put([]byte(k), []byte("v"), mod(1)))
		must(u.Attach([]byte(k), 1))
	}
	must(u.Put([]byte("other"), []byte("v"), mod(1)))
	must(u.Attach([]byte("other"), 2))
	if id, err := u.Detach([]byte("b")); err != nil || id != 1 {
		t.Fatalf("detach b: %d, %v", id, err)
	}
	must(u.Commit(true))
	must(s.Close())

	if s, err = Open(dir, Options{WALSegmentSize: testSegmentSize}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ls, err := s.Leases()
	if err != nil || !slices.Equal(ls, []Lease{{1, 5, 2}, {2, 7, 1}}) {
		t.Fatalf("leases after reopen: %v, %v", ls, err)
	}
	u = s.NewUpdate()
	defer u.Close()
	keys, ok, err := u.RevokeLease(1, 10)
	if err != nil || !ok || len(keys) != 2 || string(keys[0]) != "a" || string(keys[1]) != "c" {
		t.Fatalf("revoke: %q, %v, %v", keys, ok, err)
	}
	for k, want := range map[string]bool{"a": false, "b": true, "c": false, "other": true} {
		if _, _, ok, _ := u.Get([]byte(k)); ok != want {
			t.Errorf("%s present %v after the revoke, want %v", k, ok, want)
		}
	}
	if id, _ := u.KeyLease([]byte("a")); id != 0 {
		t.Errorf("revoked key still names lease %d", id)
	}
	if _, ok, _ := u.RevokeLease(1, 11); ok {
		t.Error("second revoke found the lease")
	}
}

func TestValidLeaseRecord(t *testing.T) {
	for _, tc := range []struct {
		key, raw string
		ok       bool
	}{
		{"l12345678", "0123456789abcdef", true},
		{"l1234567", "0123456789abcdef", false},
		{"a12345678k", "", true},
		{"a12345678", "", false},
		{"kkey", "01234567", true},
		{"kkey", "", false},
		{"x", "", false},
		{"", "", false},
	} {
		if got := validLeaseRecord([]byte(tc.key), []byte(tc.raw)); got != tc.ok {
			t.Errorf("%q=%q: %v", tc.key, tc.raw, got)
		}
	}
}

type leasedKey struct {
	key, value     string
	version, lease uint64
}

// TestRestoreLeases: a restore writes the backup's leases with the key
// counts of the keys attached to them, and a view of the restored state
// gives back each key's lease; a key attached to a lease the backup lacks
// is refused.
func TestRestoreLeases(t *testing.T) {
	s, err := Open(t.TempDir(), Options{WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := []leasedKey{{"a", "1", 3, 0}, {"svc/a", "x", 4, 7}, {"svc/b", "y", 5, 9}, {"svc/c", "z", 6, 7}}
	leases := []Lease{{ID: 7, TTL: 5e9}, {ID: 9, TTL: 6e9}, {ID: 12, TTL: 7e9}}
	err = s.Restore(10, 10, []Member{{ID: 1, Addr: "a:1"}}, leases, func(add func(key, value []byte, m revision.Meta) error) error {
		for _, k := range want {
			if err := add([]byte(k.key), []byte(k.value), revision.Meta{Create: k.version, Mod: k.version, Version: 1, Lease: k.lease}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := s.Leases(); err != nil || !slices.Equal(ls, []Lease{{7, 5e9, 2}, {9, 6e9, 1}, {12, 7e9, 0}}) {
		t.Fatalf("restored leases %v, %v", ls, err)
	}
	v, err := s.View()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var got []leasedKey
	err = v.ForEach(func(key, value []byte, m revision.Meta) error {
		got = append(got, leasedKey{string(key), string(value), m.Mod, m.Lease})
		return nil
	})
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("view of the restored state: %v, %v; want %v", got, err, want)
	}
	if ls, err := v.Leases(); err != nil || len(ls) != 3 {
		t.Fatalf("view's leases %v, %v", ls, err)
	}

	for name, m := range map[string]revision.Meta{
		"a key on a missing lease":          {Create: 1, Mod: 1, Version: 1, Lease: 7},
		"a key modified after the revision": {Create: 1, Mod: 11, Version: 2},
	} {
		s2, err := Open(t.TempDir(), Options{WALSegmentSize: testSegmentSize})
		if err != nil {
			t.Fatal(err)
		}
		err = s2.Restore(10, 10, []Member{{ID: 1, Addr: "a:1"}}, nil, func(add func(key, value []byte, m revision.Meta) error) error {
			return add([]byte("k"), nil, m)
		})
		s2.Close()
		if !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("restore of %s: %v, want ErrBadSnapshot", name, err)
		}
	}
}
