package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

// TestScan: Scan walks only the user keys of [start, end), in order, with
// their versions, never a deleted key, a metadata, log or member key, and
// returns the applied index its view holds; the callback can stop it.
func TestScan(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	commit(t, s, func(u *Update) error {
		errs := []error{u.Append(ents(1, 6, 1)), u.SetMember(Member{ID: 1, Addr: "x"})}
		for i, k := range []string{"a", "b", "b\xff", "c", "\xff"} {
			errs = append(errs, u.Put([]byte(k), []byte("v"+k), mod(uint64(i+1))))
		}
		_, err := u.Delete([]byte("c"), 6)
		return errors.Join(append(errs, err, u.SetApplied(6))...)
	})
	scan := func(start, end string, stopAfter int) (string, uint64) {
		t.Helper()
		var got []string
		applied, _, err := s.Scan([]byte(start), []byte(end), func(k, v []byte, m revision.Meta) bool {
			got = append(got, fmt.Sprintf("%q=%s@%d", k, v, m.Mod))
			return len(got) != stopAfter
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " "), applied
	}
	for _, tc := range []struct {
		start, end string
		stop       int
		want       string
	}{
		{"", "", 0, `"a"=va@1 "b"=vb@2 "b\xff"=vb` + "\xff" + `@3 "\xff"=v` + "\xff" + `@5`},
		{"b", "c", 0, `"b"=vb@2 "b\xff"=vb` + "\xff" + `@3`},
		{"b\x00", "", 0, `"b\xff"=vb` + "\xff" + `@3 "\xff"=v` + "\xff" + `@5`},
		{"c", "d", 0, ``},
		{"b", "b", 0, ``},
		{"", "", 2, `"a"=va@1 "b"=vb@2`},
	} {
		got, applied := scan(tc.start, tc.end, tc.stop)
		if got != tc.want || applied != 6 {
			t.Errorf("Scan(%q, %q) = %s at %d, want %s at 6", tc.start, tc.end, got, applied, tc.want)
		}
	}
}
