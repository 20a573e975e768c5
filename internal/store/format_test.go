package store

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest/fixture"
	"github.com/kvd-project/kvd/internal/revision"
)

// untarFixture unpacks a data directory written by the build from before
// revisions (internal/store/testdata/README.md says how it was made).
func untarFixture(t *testing.T) string {
	return filepath.Join(fixture.Untar(t, "testdata/format1-datadir.tar.gz"), "data")
}

// TestOpenMigratesTheRevisionsFormat: a data directory of format 2,
// written by the previous build, opens: its format becomes 3 and its keys,
// their metadata and their history read as that build wrote them.
func TestOpenMigratesTheRevisionsFormat(t *testing.T) {
	dir := filepath.Join(fixture.Untar(t, "testdata/format2-datadir.tar.gz"), "data")
	for range 2 { // the second Open finds format 3
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("Open of a format-2 directory: %v", err)
		}
		if raw, ok, err := s.getRaw(keyFormat); err != nil || !ok || string(raw) != string(encodeU64(DataFormat)) {
			t.Fatalf("format key = %x, %v, %v; want %d", raw, ok, err, DataFormat)
		}
		got := map[string]string{}
		if _, _, err := s.Scan(nil, nil, func(k, v []byte, m revision.Meta) bool {
			got[string(k)] = fmt.Sprintf("%s c%d m%d v%d lease=%t", v, m.Create, m.Mod, m.Version, m.Lease != 0)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"alpha":     "three c5 m5 v1 lease=false",
			"beta":      "two-again c2 m3 v2 lease=false",
			"svc/node1": "10.0.0.1 c6 m6 v1 lease=true",
		}
		if !maps.Equal(got, want) || s.Revision() != 6 {
			t.Fatalf("keys %v at revision %d; want %v at 6", got, s.Revision(), want)
		}
		var at2 []string
		if _, err := s.RangeAt(nil, nil, 2, func(k, v []byte, _ revision.Meta) bool {
			at2 = append(at2, string(k)+"="+string(v))
			return true
		}); err != nil || !slices.Equal(at2, []string{"alpha=one", "beta=two"}) {
			t.Fatalf("at revision 2: %v, %v; want [alpha=one beta=two]", at2, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenRefusesDataOfAnOlderBuild: a data directory the previous build
// wrote (raft state and keys, no data format) is refused with the way
// forward, not misread.
func TestOpenRefusesDataOfAnOlderBuild(t *testing.T) {
	dir := untarFixture(t)
	s, err := Open(dir, Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open took a directory of data format 1")
	}
	var fe *FormatError
	if !errors.Is(err, ErrDataFormat) || !errors.As(err, &fe) || fe.Found != DataFormatNoRevisions {
		t.Fatalf("err = %v; want a FormatError of format %d", err, DataFormatNoRevisions)
	}
	for _, want := range []string{dir, "older kvd (data format 1)", "needs format 3", "kvctl snapshot save", "kvd --restore", "docs/upgrading.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// Refused, the directory is left as it was: the older build still
	// opens it (the format key was not written).
	s2, err := Open(dir, Options{})
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
	s, err = Open(dir, Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open took a directory of a newer data format")
	}
	if !errors.Is(err, ErrDataFormat) || !strings.Contains(err.Error(), "written by a newer kvd (data format 4)") {
		t.Fatalf("err = %v; want a newer-format refusal", err)
	}
}
