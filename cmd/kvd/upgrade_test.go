package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/fixture"
	"github.com/kvd-project/kvd/internal/store"
)

// untarDataDir unpacks a data directory written by the previous build
// (internal/store/testdata/README.md says how it was made).
func untarDataDir(t *testing.T) string {
	return filepath.Join(fixture.Untar(t, "../../internal/store/testdata/format1-datadir.tar.gz"), "data")
}

// TestOlderDataDirRefused: kvd on a data directory the previous build
// wrote (no revisions) exits 1 with one line naming the data formats and
// the way forward (a backup with the older kvd, restored with this one),
// rather than misreading it.
func TestOlderDataDirRefused(t *testing.T) {
	kvd := buildKVD(t)
	data := untarDataDir(t)
	addr := kvdtest.FreeAddrs(t, 1)[0]
	code, out := runKVD(t, kvd, 30*time.Second, "--data-dir", data, "--listen", addr, "--table-mem", "8MiB")
	want := "kvd: " + (&store.FormatError{Dir: data, Found: store.DataFormatNoRevisions}).Error()
	if code != 1 || lastLine(out) != want {
		t.Fatalf("kvd on a data dir of data format 1: exit %d, output:\n%s\nwant exit 1 and %q", code, out, want)
	}
}
