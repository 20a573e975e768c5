package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestProcessBackupRestore drives backup and restore as an operator would:
// kvctl snapshot save from a running kvd, kvctl snapshot status, a new kvd
// started with --restore serving the saved keys, a damaged copy refused by
// both kvctl snapshot status and kvd --restore (which exits with the
// reason), a key on a TTL lease restored attached to it (the lease listed,
// at its full TTL), and a restart of the restored node without --restore.
func TestProcessBackupRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	bin := kvdtest.SharedBin(t)
	addrs := kvdtest.FreeAddrs(t, 2)
	startKVD(t, filepath.Join(bin, "kvd"), "--data-dir", t.TempDir(), "--listen", addrs[0], "--initial-cluster", "1="+addrs[0], "--table-mem", "8MiB")
	kvctl := func(addr string, args ...string) (string, string, error) {
		cmd := exec.Command(filepath.Join(bin, "kvctl"), append([]string{"--endpoints", addr, "--timeout", "3s"}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	waitPut := func(addr, k, v string) {
		t.Helper()
		wait.NoError(t, "kvd at "+addr+" to accept a put", func() error {
			if _, errOut, err := kvctl(addr, "put", k, v); err != nil {
				return fmt.Errorf("%v: %s", err, errOut)
			}
			return nil
		})
	}
	waitPut(addrs[0], "hello", "world")
	waitPut(addrs[0], "color", "blue")
	out, errOut, err := kvctl(addrs[0], "lease", "grant", "1h")
	if err != nil {
		t.Fatalf("lease grant: %v (%s)", err, errOut)
	}
	lease := strings.TrimSpace(out)
	if _, errOut, err := kvctl(addrs[0], "put", "--lease", lease, "svc", "addr"); err != nil {
		t.Fatalf("put --lease: %v (%s)", err, errOut)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "backup.kvd")
	out, errOut, err = kvctl(addrs[0], "snapshot", "save", file)
	if err != nil || !strings.HasPrefix(out, "saved "+file+": index ") || !strings.Contains(out, " 3 keys, 1 leases,") {
		t.Fatalf("snapshot save = %q, %v (%s)", out, err, errOut)
	}
	if out, errOut, err := kvctl(addrs[0], "snapshot", "status", file); err != nil || !strings.Contains(out, " 3 keys, 1 leases,") ||
		!strings.Contains(out, ", revision ") {
		t.Fatalf("snapshot status = %q, %v (%s)", out, err, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-backup.TrailerLen-1] ^= 1 // the last value's last byte: damage only the checksum sees
	damaged := filepath.Join(dir, "damaged.kvd")
	if err := os.WriteFile(damaged, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := kvctl(addrs[0], "snapshot", "status", damaged); err == nil || !strings.Contains(errOut, "checksum mismatch") {
		t.Fatalf("snapshot status of a damaged backup: %v, stderr %q", err, errOut)
	}
	// A damaged backup is a failure (exit 1), not a bad flag (exit 2).
	p := startKVD(t, filepath.Join(bin, "kvd"), "--data-dir", t.TempDir(), "--listen", addrs[1], "--initial-cluster", "1="+addrs[1], "--restore", damaged,
		"--initial-cluster-token", "restored")
	if code := p.exited(t, 20*time.Second); code != 1 || !strings.Contains(p.output(), "checksum mismatch") {
		t.Fatalf("kvd --restore of a damaged backup exited %d, want 1:\n%s", code, p.output())
	}
	// Flags the node refuses are refused before the restore writes
	// anything: the same restore, the flags fixed, must still be possible.
	for _, bad := range [][]string{{"--enable-pprof"}, {"--lease-drift", "0.9"}} {
		refused := t.TempDir()
		p = startKVD(t, filepath.Join(bin, "kvd"), append([]string{"--data-dir", refused, "--listen", addrs[1], "--initial-cluster", "1=" + addrs[1],
			"--restore", file, "--initial-cluster-token", "restored"}, bad...)...)
		if code := p.exited(t, 20*time.Second); code != 2 {
			t.Fatalf("kvd --restore %v exited %d, want 2:\n%s", bad, code, p.output())
		}
		if ents, _ := os.ReadDir(refused); len(ents) != 0 {
			t.Fatalf("kvd --restore %v was refused its flags after writing %d entries into its data directory", bad, len(ents))
		}
	}

	data := t.TempDir()
	args := []string{"--data-dir", data, "--listen", addrs[1], "--initial-cluster", "1=" + addrs[1], "--table-mem", "8MiB", "--initial-cluster-token", "restored"}
	p = startKVD(t, filepath.Join(bin, "kvd"), append(args, "--restore", file)...)
	waitPut(addrs[1], "new", "key")
	if out, errOut, err := kvctl(addrs[1], "get", "hello"); err != nil || out != "world\n" {
		t.Fatalf("restored get = %q, %v (%s)", out, err, errOut)
	}
	if out, errOut, err := kvctl(addrs[1], "lease", "list"); err != nil || out != "found 1 leases\n"+lease+"\n" {
		t.Fatalf("restored lease list = %q, %v (%s)", out, err, errOut)
	}
	if out, errOut, err := kvctl(addrs[1], "lease", "ttl", lease); err != nil ||
		!strings.Contains(out, "granted TTL 1h0m0s, remaining ") || !strings.HasSuffix(out, ", 1 keys\n") {
		t.Fatalf("restored lease ttl = %q, %v (%s)", out, err, errOut)
	}
	p.cmd.Process.Signal(os.Interrupt)
	p.exited(t, 20*time.Second)
	startKVD(t, filepath.Join(bin, "kvd"), args...)
	waitPut(addrs[1], "after", "restart")
	if out, errOut, err := kvctl(addrs[1], "get", "color"); err != nil || out != "blue\n" {
		t.Fatalf("get after restarting the restored node = %q, %v (%s)", out, err, errOut)
	}
}
