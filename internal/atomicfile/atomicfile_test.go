package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteSyncsTheRename checks that the directory is synced after the
// new file has its name, so the rename is durable when Write returns.
func TestWriteSyncsTheRename(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "backup")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	var synced []string
	syncDir := func(d string) error {
		b, err := os.ReadFile(path)
		if err != nil || string(b) != "new" {
			t.Errorf("directory synced before the rename: %s holds %q (%v)", path, b, err)
		}
		synced = append(synced, d)
		return SyncDir(d)
	}
	if err := writeSynced(path, func(f *os.File) error {
		_, err := f.WriteString("new")
		return err
	}, syncDir); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("directories synced: %q, want [%q]", synced, dir)
	}
	checkOnly(t, dir, "backup", "new")
}

func TestWriteFailureLeavesTheOldFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "backup")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, func(f *os.File) error {
		f.WriteString("half")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want the writer's error", err)
	}
	checkOnly(t, dir, "backup", "old")
}

func TestWriteDirSyncFailureIsReported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "backup")
	boom := errors.New("eio")
	failSync := func(string) error { return boom }
	err := writeSynced(path, func(f *os.File) error { _, err := f.WriteString("new"); return err }, failSync)
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want the directory sync's error", err)
	}
	checkOnly(t, dir, "backup", "new")
}

// checkOnly checks that dir holds exactly name, with content want: no
// temporary file is left behind.
func checkOnly(t *testing.T, dir, name, want string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != name {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("%s holds %q, want only %q", dir, names, name)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil || string(b) != want {
		t.Fatalf("%s = %q (%v), want %q", name, b, err, want)
	}
}
