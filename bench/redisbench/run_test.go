package redisbench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunStopsWhatItStartedWhenATargetNeverAnswers: a redis-server that
// starts but never serves fails the run with its output, and is stopped
// (no process is left behind, nothing panics).
func TestRunStopsWhatItStartedWhenATargetNeverAnswers(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	server := filepath.Join(dir, "redis-server")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Redis server v=0.0.0 sha=0'; exit 0; fi\n" +
		"echo \"$$\" >" + pidFile + "\necho 'listening nowhere'\nexec /bin/sleep 60\n"
	bench := filepath.Join(dir, "redis-benchmark")
	for f, body := range map[string]string{server: script, bench: "#!/bin/sh\necho 'redis-benchmark 0.0.0'\n"} {
		if err := os.WriteFile(f, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Run(context.Background(), Config{Targets: []string{Redis}, RedisServer: server, RedisBenchmark: bench,
		ReadyTimeout: 300 * time.Millisecond, Dir: filepath.Join(dir, "data")})
	if err == nil || rep != nil {
		t.Fatalf("Run = %+v, %v; want an error", rep, err)
	}
	if !strings.Contains(err.Error(), "listening nowhere") {
		t.Errorf("error lacks the server's output: %v", err)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatalf("pid file %q", b)
	}
	if syscall.Kill(pid, 0) == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the server (pid %d) was left running", pid)
	}
}
