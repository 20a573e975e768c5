package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/store"
)

// untarDataDir unpacks a data directory written by the previous build
// (internal/store/testdata/README.md says how it was made) and returns it.
func untarDataDir(t *testing.T) string {
	t.Helper()
	f, err := os.Open("../../internal/store/testdata/format1-datadir.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return filepath.Join(dst, "data")
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, filepath.Clean(h.Name))
		if h.Typeflag == tar.TypeDir {
			err = os.MkdirAll(p, 0o700)
		} else {
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o600)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
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
