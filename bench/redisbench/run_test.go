package redisbench

import (
	"context"
	"os"
	"os/exec"
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

// TestRunGoFloor runs the series' redis-benchmark tests against go-floor,
// a built kvbench's resp-floor command, unpipelined and pipelined: every
// test completes (redis-benchmark stops at an error reply).
func TestRunGoFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvbench and runs redis-benchmark")
	}
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		t.Skip("no redis-benchmark in PATH")
	}
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", bin+"/", "github.com/kvd-project/kvd/cmd/kvbench").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tests := []string{"set", "get", "incr", "mset"}
	rep, err := Run(ctx, Config{Kvbench: filepath.Join(bin, "kvbench"), Targets: []string{GoFloor}, Tests: tests,
		Pipelines: []int{1, 16}, Requests: 500, Rounds: 1, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Samples) != 2*len(tests) || len(rep.Errors) != 0 {
		t.Fatalf("%d samples, errors %q; want %d samples", len(rep.Samples), rep.Errors, 2*len(tests))
	}
	for _, s := range rep.Samples {
		if s.Target != GoFloor || s.RPS <= 0 {
			t.Errorf("sample %+v", s)
		}
	}
}
