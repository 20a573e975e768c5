package store

import (
	"slices"
	"testing"
)

// TestLeaseRecords: attach, detach and revoke keep the lease's key count
// and the key→lease index in step; a revoke deletes exactly the lease's
// keys; the leases survive a reopen.
func TestLeaseRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
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
		must(u.Put([]byte(k), []byte("v"), 1))
		must(u.Attach([]byte(k), 1))
	}
	must(u.Put([]byte("other"), []byte("v"), 1))
	must(u.Attach([]byte("other"), 2))
	if id, err := u.Detach([]byte("b")); err != nil || id != 1 {
		t.Fatalf("detach b: %d, %v", id, err)
	}
	must(u.Commit(true))
	must(s.Close())

	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ls, err := s.Leases()
	if err != nil || !slices.Equal(ls, []Lease{{1, 5, 2}, {2, 7, 1}}) {
		t.Fatalf("leases after reopen: %v, %v", ls, err)
	}
	u = s.NewUpdate()
	defer u.Close()
	keys, ok, err := u.RevokeLease(1)
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
	if _, ok, _ := u.RevokeLease(1); ok {
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
