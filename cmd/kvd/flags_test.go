package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// writeTinyBackup writes a valid one-key backup for --restore.
func writeTinyBackup(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "b.kvd")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := backup.NewWriter(f, backup.Header{Index: 10, Keys: 1, Cluster: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte("k"), []byte("v"), 5); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadNodeFlagsRefusedBeforeDataDir: README "Running kvd": "Bad flags print a clear message and exit 2, before
// the node touches its data directory". main.go: "a restore must not run for
// a node that then refuses its flags". These flags were refused only by
// raft.Open / Listen, after the restore had written the data directory,
// with exit status 1; or (--id 0, --listen :0, --lease-drift 0) not at all.
func TestBadNodeFlagsRefusedBeforeDataDir(t *testing.T) {
	kvd := buildKVD(t)
	file := writeTinyBackup(t)
	addr := kvdtest.FreeAddrs(t, 1)[0]
	for _, bad := range [][]string{
		{"--tick", "500us"},
		{"--listen", "127.0.0.1"}, // no port
		{"--initial-cluster-token", strings.Repeat("t", 300)},
		{"--id", "0"},               // the help says (> 0); it silently runs as node 1
		{"--listen", "127.0.0.1:0"}, // member address with port 0 enters the log
		{"--lease-drift", "0"},      // it silently ran with the default
	} {
		data := t.TempDir()
		args := append([]string{"--data-dir", data, "--listen", addr, "--restore", file,
			"--initial-cluster-token", "restored"}, bad...)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, err := exec.CommandContext(ctx, kvd, args...).CombinedOutput()
		cancel()
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		ents, _ := os.ReadDir(data)
		if code != 2 || len(ents) != 0 {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Errorf("kvd --restore %v: exit %d (want 2), %d entries left in --data-dir (want 0); last line: %s",
				bad[0], code, len(ents), lines[len(lines)-1])
		}
	}
}
