package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/revision"
)

// TestRestoredDataDirPrivate: a backup holds all the data and kvctl writes
// it with mode 0600; kvd --restore into a new data directory must not
// leave that data readable by every local user (raft.Restore creates the
// directory 0700, but kvd made it 0755 before).
func TestRestoredDataDirPrivate(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	bin := buildKVD(t)
	file := filepath.Join(t.TempDir(), "backup.kvd")
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	w, err := backup.NewWriter(f, backup.Header{Index: 10, Keys: 1, Revision: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte("secret"), []byte("value"), revision.Meta{Create: 7, Mod: 7, Version: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	addrs := kvdtest.FreeAddrs(t, 2)
	data := filepath.Join(t.TempDir(), "node")
	p := startKVD(t, bin, "--data-dir", data, "--listen", addrs[0], "--initial-cluster", "1="+addrs[0], "--metrics-listen", addrs[1], "--table-mem", "8MiB",
		"--restore", file, "--initial-cluster-token", "restored")
	waitHealthy(t, p, addrs[1])
	st, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		var readable []string
		filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
			if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o004 != 0 {
				readable = append(readable, filepath.Base(path))
			}
			return nil
		})
		t.Fatalf("restored data directory %s has mode %v; others may read %d entries in it (%v)",
			data, st.Mode().Perm(), len(readable), readable)
	}
}
