package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/revision"
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
	w, err := backup.NewWriter(f, backup.Header{Index: 10, Keys: 1, Cluster: 0, Revision: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte("k"), []byte("v"), revision.Meta{Create: 5, Mod: 5, Version: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadNodeFlagsRefusedBeforeDataDir: docs/operations.md, "Running a node": "Bad flags print a clear message and exit 2, before
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
		{"--id", "0"}, // the help says (> 0); it silently runs as node 1
		{"--listen", "127.0.0.1:0", "--initial-cluster", "1=127.0.0.1:0"}, // member address with port 0 enters the log
		{"--lease-drift", "0"}, // it silently ran with the default
		// Conflicts found only once the restore was done, or never.
		{"--metrics-listen", addr},                                // --listen's port
		{"--initial-cluster", "1=" + addr + ",2=" + addr},         // two members, one address
		{"--table-inline", "off", "--table-inline-grace", "50ms"}, // ignored without arenas
		{"--table-inline", "0"}, {"--table-inline", "-8"},         // 0 ran with the default; off turns arenas off
		{"--tls-reload-interval", "-5s"},                        // taken as 0
		{"--max-watches", "0"}, {"--max-watches-per-conn", "0"}, // 0 ran with the default,
		{"--max-connections", "0"}, {"--watch-history-events", "0"}, // not with what was asked
		{"--watch-progress-notify-interval", "0"}, {"--watch-progress-notify-interval", "10ms"},
		{"--watch-history-bytes", "0"}, {"--tick", "0"}, {"--reuse-grace", "0"},
		{"--snapshot-count", "0"}, {"--table-mem", "0"},
		{"--raft-log", "files"},                                   // neither pebble nor wal
		{"--redis-listen", addr}, {"--redis-listen", "127.0.0.1"}, // --listen's port; no port
		{"--redis-max-conns", "0"}, {"--redis-max-pipeline", "0"}, {"--redis-max-args", "0"}, {"--redis-max-inline", "0"},
	} {
		data := t.TempDir()
		args := append([]string{"--data-dir", data, "--listen", addr, "--restore", file,
			"--initial-cluster", "1=" + addr, "--initial-cluster-token", "restored"}, bad...)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, err := exec.CommandContext(ctx, kvd, args...).CombinedOutput()
		cancel()
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		ents, _ := os.ReadDir(data)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		// Refused for the base arguments (a flag they lack), it would
		// not test this case's flag.
		if last := lines[len(lines)-1]; code != 2 || len(ents) != 0 || strings.Contains(last, "nor --join") {
			t.Errorf("kvd --restore %v: exit %d (want 2), %d entries left in --data-dir (want 0); last line (want this case's refusal): %s",
				bad, code, len(ents), last)
		}
	}
}

// runKVD runs kvd for at most d and returns its exit code (-1: still
// running at d, then killed) and its output.
func runKVD(t *testing.T, bin string, d time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		code = -1
	}
	return code, string(out)
}

// TestRestoreWithListenTaken: a --listen port already taken is found
// before the restore writes the data directory, so the same restore can
// be run again once the port is free.
func TestRestoreWithListenTaken(t *testing.T) {
	kvd := buildKVD(t)
	file := writeTinyBackup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := t.TempDir()
	code, out := runKVD(t, kvd, 10*time.Second, "--data-dir", data, "--listen", ln.Addr().String(),
		"--initial-cluster", "1="+ln.Addr().String(), "--restore", file, "--initial-cluster-token", "restored")
	ents, _ := os.ReadDir(data)
	if code != 1 || len(ents) != 0 || !strings.Contains(out, "nothing was written to") {
		t.Fatalf("restore with --listen taken: exit %d (want 1), %d entries in --data-dir (want 0): %s", code, len(ents), out)
	}
}

// TestJoinWithoutOwnEntry: a joining node whose --initial-cluster lists
// only the member that will contact it (as the --join row of docs/operations.md says) is
// reached where it listens, as with no --initial-cluster at all; it was
// refused with "Addr is required when joining", a field no flag names.
// And a node listening elsewhere than its own --initial-cluster entry is
// warned about: its peers dial the entry.
func TestJoinWithoutOwnEntry(t *testing.T) {
	kvd := buildKVD(t)
	addrs := kvdtest.FreeAddrs(t, 3)
	code, out := runKVD(t, kvd, 3*time.Second, "--id", "4", "--join", "--listen", addrs[0],
		"--initial-cluster", "1="+addrs[1], "--data-dir", t.TempDir())
	if code != -1 {
		t.Fatalf("kvd --join with --initial-cluster listing another member: exit %d (want it running): %s", code, out)
	}
	code, out = runKVD(t, kvd, 3*time.Second, "--listen", addrs[0], "--initial-cluster", "1="+addrs[2],
		"--data-dir", t.TempDir())
	if code != -1 || !strings.Contains(out, "--listen differs from this node's --initial-cluster address") {
		t.Fatalf("kvd listening on %s as member 1=%s: exit %d, no warning: %s", addrs[0], addrs[2], code, out)
	}
	code, out = runKVD(t, kvd, 3*time.Second, "--listen", "0.0.0.0:"+port(t, addrs[0]), "--initial-cluster", "1="+addrs[0],
		"--data-dir", t.TempDir())
	if code != -1 || strings.Contains(out, "differs") {
		t.Fatalf("kvd listening on every address at its member port: exit %d, or warned: %s", code, out)
	}
}

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMetricsPortBesideRDMAListen: over --transport rdma, --listen is an
// rdma_cm address with ports of its own: a TCP --metrics-listen on the
// same port number does not collide with it. Over tcp it does.
func TestMetricsPortBesideRDMAListen(t *testing.T) {
	for _, metrics := range []string{"10.0.0.1:7301", "0.0.0.0:7301", ":7301"} {
		for _, tr := range []string{"rdma", "tcp"} {
			o, err := parseFlags([]string{"--data-dir", t.TempDir(), "--transport", tr,
				"--listen", "10.0.0.1:7301", "--metrics-listen", metrics})
			if err != nil {
				t.Fatal(err)
			}
			if err := checkRunFlags(o); (err != nil) != (tr == "tcp") {
				t.Errorf("--transport %s --listen 10.0.0.1:7301 --metrics-listen %s: %v", tr, metrics, err)
			}
		}
	}
}
