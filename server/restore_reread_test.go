package server_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport/tcp"
)

func writeBackup(t *testing.T, h backup.Header, recs [][3]any) []byte {
	t.Helper()
	var buf fileBuf
	w, err := backup.NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Add([]byte(r[0].(string)), []byte(r[1].(string)), r[2].(uint64)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.b
}

type fileBuf struct{ b []byte }

func (f *fileBuf) Write(p []byte) (int, error) { f.b = append(f.b, p...); return len(p), nil }

// TestRestoreFileReplacedWhileRestoring: kvd --restore reads the backup
// file twice, once to check it and once to write it. If the path names
// another backup by the second read (a backup job renaming this hour's
// backup over the same name; here a named pipe makes the timing sure),
// the node must not install one file's records under the other's index:
// restored versions above the restored index break "new writes get higher
// versions" (IfVersion conditions, watches).
func TestRestoreFileReplacedWhileRestoring(t *testing.T) {
	older := writeBackup(t, backup.Header{Index: 10, Keys: 1}, [][3]any{{"a", "old", uint64(5)}})
	newer := writeBackup(t, backup.Header{Index: 1000, Keys: 2}, [][3]any{{"a", "new", uint64(900)}, {"b", "new", uint64(999)}})
	path := filepath.Join(t.TempDir(), "backup.kvd")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	// inotify tells when a reader closed the pipe: the next writer then
	// meets the next reader, not the one still draining the first file.
	ino, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		t.Skip("inotify:", err)
	}
	defer syscall.Close(ino)
	if _, err := syscall.InotifyAddWatch(ino, path, syscall.IN_CLOSE_NOWRITE); err != nil {
		t.Skip("inotify:", err)
	}
	go func() {
		for i, b := range [][]byte{older, newer} {
			if i > 0 {
				ev := make([]byte, 4096)
				if _, err := syscall.Read(ino, ev); err != nil {
					return
				}
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			f.Write(b)
			f.Close()
		}
	}()
	addr := kvdtest.FreeAddrs(t, 1)[0]
	tr, err := tcp.New(tcp.Config{Node: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	s, err := server.New(server.Config{ID: 1, Listen: addr, DataDir: t.TempDir(), Transport: tr,
		InitialClusterToken: "restored", Restore: path, Logger: quietLog()})
	if err != nil {
		t.Logf("restore refused: %v", err)
		return // refusing is right
	}
	t.Cleanup(func() { s.Close() })
	c := newClient(t, []string{addr}, client.Linearizable)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var maxRestored uint64
	for _, k := range []string{"a", "b"} {
		if _, v, err := c.GetVersion(ctx, []byte(k)); err == nil {
			maxRestored = max(maxRestored, v)
		}
	}
	v, err := c.PutVersion(ctx, []byte("c"), []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	if v <= maxRestored {
		t.Fatalf("first write after the restore got version %d, below a restored key's version %d (restored index %d)",
			v, maxRestored, s.Node().Status().Applied)
	}
}
