package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// python3 is Debian's interpreter, the one python3-etcd3 installs into.
const python3 = "/usr/bin/python3"

// etcd3SmokeTimeout bounds one run of testdata/etcd3_smoke.py: its RPCs
// time out after 10s each and its waits for watch events after 20s.
const etcd3SmokeTimeout = 2 * time.Minute

// requirePythonEtcd3 fails the test unless Debian's python3-etcd3 is
// importable.
func requirePythonEtcd3(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(python3, "-c", "import etcd3").CombinedOutput(); err != nil {
		t.Fatalf("python3-etcd3 is missing (%v: %s): run scripts/deps.sh", err, out)
	}
}

// runEtcd3Smoke runs testdata/etcd3_smoke.py, python3-etcd3 unmodified,
// against the etcd API at addr (host:port) with keys under prefix; the
// script prints one line per check and exits non-zero if one failed.
func runEtcd3Smoke(t *testing.T, addr, prefix string) {
	t.Helper()
	script, err := filepath.Abs("testdata/etcd3_smoke.py")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcd3SmokeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python3, script, addr, prefix)
	// The script's own stdout is what the test shows; keep Python from
	// buffering it or writing bytecode into the tree.
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3-etcd3 against %s: %v (context: %v)\n%s", addr, err, ctx.Err(), out)
	}
	t.Logf("python3-etcd3 against %s:\n%s", addr, out)
}
