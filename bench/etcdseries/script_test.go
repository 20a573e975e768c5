package etcdseries

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBuildScriptIsIdempotent: scripts/etcd-benchmark.sh builds the tool
// from bench/etcdbench once, builds nothing while the binary is newer
// than that module's go.mod and go.sum, and again once it is older. A
// stand-in go records its calls.
func TestBuildScriptIsIdempotent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, calls := filepath.Join(dir, "bin"), filepath.Join(dir, "calls")
	fakeGo := filepath.Join(dir, "go")
	// Records its working directory and arguments, and writes the -o file.
	script := "#!/bin/sh\necho \"$(basename \"$PWD\") $*\" >>" + calls + "\nwhile [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then echo tool >\"$2\" && chmod +x \"$2\"; fi; shift; done\n"
	if err := os.WriteFile(fakeGo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func() {
		t.Helper()
		cmd := exec.Command("../../scripts/etcd-benchmark.sh")
		cmd.Env = append(os.Environ(), "BIN="+bin, "GO="+fakeGo)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("etcd-benchmark.sh: %v\n%s", err, out)
		}
	}
	builds := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "\n")
	}
	run()
	b, _ := os.ReadFile(calls)
	if want := "etcdbench build -o " + filepath.Join(bin, "etcd-benchmark.tmp") + " go.etcd.io/etcd/v3/tools/benchmark\n"; string(b) != want {
		t.Errorf("first run: go called as %q, want %q", b, want)
	}
	if _, err := os.Stat(filepath.Join(bin, "etcd-benchmark")); err != nil {
		t.Fatalf("no binary after the build: %v", err)
	}
	run()
	if n := builds(); n != 1 {
		t.Errorf("second run built again: %d builds", n)
	}
	old := time.Unix(0, 0)
	if err := os.Chtimes(filepath.Join(bin, "etcd-benchmark"), old, old); err != nil {
		t.Fatal(err)
	}
	run()
	if n := builds(); n != 2 {
		t.Errorf("a binary older than the module's go.mod: %d builds, want 2", n)
	}
}
