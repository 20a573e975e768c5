package store

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest/fixture"
)

// untarFixture unpacks a data directory written by the previous build
// (internal/store/testdata/README.md says how it was made).
func untarFixture(t *testing.T) string {
	return filepath.Join(fixture.Untar(t, "testdata/format1-datadir.tar.gz"), "data")
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
	for _, want := range []string{dir, "older kvd (data format 1)", "needs format 2", "kvctl snapshot save", "kvd --restore", "docs/upgrading.md"} {
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
	if !errors.Is(err, ErrDataFormat) || !strings.Contains(err.Error(), "written by a newer kvd (data format 3)") {
		t.Fatalf("err = %v; want a newer-format refusal", err)
	}
}
