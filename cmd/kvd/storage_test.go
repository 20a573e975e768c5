package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport/tcp"
)

// Storage faults on real file systems: a small tmpfs filled up (ENOSPC)
// and a read-only bind mount (EROFS). Both need root and mounts; where
// they are not allowed the tests say so loudly and do nothing else; the
// node's handling is then covered by the injected faults of
// raft/storage_test.go (TestStorageFaultFailsCleanly, TestStorageOpenFails),
// as is a directory that turns read-only while kvd runs, which no remount
// can do to a mount with files open for writing.

func storageFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// storageMount runs mount with args onto a new directory (the last
// argument is appended) and unmounts it at the end, or returns "" (saying
// why, loudly) where that is not allowed.
func storageMount(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Logf("NOT RUN: this test needs root for mount %v (euid %d); the injected-fault tests in "+
			"raft/storage_test.go cover the node", args, os.Geteuid())
		return ""
	}
	if out, err := exec.Command("mount", append(args, dir)...).CombinedOutput(); err != nil {
		t.Logf("NOT RUN: mounts are not allowed here (mount %v: %v: %s); the injected-fault tests in "+
			"raft/storage_test.go cover the node", args, err, out)
		return ""
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// storageFill writes a file into dir until the file system is full.
func storageFill(t *testing.T, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return name
		}
	}
}

// storagePuts writes keys of about size bytes until one fails (or n went
// through), recording the acknowledged ones, and returns the failure and
// how long the failing put took.
func storagePuts(t *testing.T, c *client.Client, prefix string, n, size int, acked map[string]string) (error, time.Duration) {
	t.Helper()
	for i := range n {
		k, v := fmt.Sprintf("%s-%05d", prefix, i), strings.Repeat(prefix[:1], size)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		err := c.Put(ctx, []byte(k), []byte(v))
		took := time.Since(start)
		cancel()
		if err != nil {
			return err, took
		}
		acked[k] = v
	}
	return nil, 0
}

func checkStorageClientErr(t *testing.T, err error, took time.Duration, want string) {
	t.Helper()
	t.Logf("the put on the failed disk: %v (after %v)", err, took)
	if !errors.Is(err, client.ErrStorage) || !strings.HasPrefix(err.Error(), "kvd: storage: ") || !strings.Contains(err.Error(), want) {
		t.Fatalf("put: %v, want \"kvd: storage: ...%s\"", err, want)
	}
	if took > 5*time.Second {
		t.Errorf("the failing put took %v: not prompt", took)
	}
}

type healthBody struct {
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason"`
	Status  struct {
		StorageError string `json:"storage_error"`
	} `json:"status"`
}

func getHealth(t *testing.T, addr string) (int, healthBody) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b healthBody
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("/healthz: %v: %s", err, raw)
	}
	return resp.StatusCode, b
}

// TestHealthzStorageFailure: /healthz turns 503 with the reason when the
// node's disk fills up.
func TestHealthzStorageFailure(t *testing.T) {
	mnt := storageMount(t, "-t", "tmpfs", "-o", "size=32m", "tmpfs")
	if mnt == "" {
		return
	}
	addr := storageFreeAddr(t)
	tr, err := tcp.New(tcp.Config{Node: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	srv, err := server.New(server.Config{ID: 1, Listen: addr, DataDir: filepath.Join(mnt, "data"), Transport: tr,
		TableMem: 64 << 20, TickInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Knobs: server.Knobs{WALSegmentSize: 4 << 20}}) // the Raft log's segments fit the tmpfs
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := ln.Addr().String()
	hs := serveMetrics(ln, prometheus.NewRegistry(), srv, slog.New(slog.DiscardHandler), nil, false)
	defer hs.Close()
	c, err := client.New(client.Config{Endpoints: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wait.NoError(t, "/healthz to be healthy", func() error {
		if code, b := getHealth(t, metrics); code != http.StatusOK || !b.Healthy {
			return fmt.Errorf("%d %+v", code, b)
		}
		return nil
	})
	storageFill(t, mnt)
	err, took := storagePuts(t, c, "full", 20000, 4000, map[string]string{})
	checkStorageClientErr(t, err, took, "no space left on device")
	code, b := getHealth(t, metrics)
	if code != http.StatusServiceUnavailable || b.Healthy || !strings.HasPrefix(b.Reason, "storage: ") ||
		!strings.Contains(b.Reason, "no space left on device") || !strings.Contains(b.Status.StorageError, "no space left on device") {
		t.Fatalf("/healthz after the failure: %d %+v", code, b)
	}
	t.Logf("/healthz: %d %+v", code, b)
}

// kvdProc is a kvd process whose output and exit the test watches.
type kvdProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error // Wait's, once done is closed
}

func (p *kvdProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *kvdProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func startKVD(t *testing.T, bin string, args ...string) *kvdProc {
	t.Helper()
	p := &kvdProc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// exited waits up to d for the process to exit and returns its exit code.
func (p *kvdProc) exited(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("kvd still running after %v:\n%s", d, p.output())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("kvd: %v", p.err)
	}
	return 0
}

// buildKVD returns the path of the kvd binary, built once for every test
// of the package (kvdtest.SharedBin).
func buildKVD(t *testing.T) string {
	t.Helper()
	return filepath.Join(kvdtest.SharedBin(t), "kvd")
}

func waitHealthy(t *testing.T, p *kvdProc, metrics string) {
	t.Helper()
	wait.NoError(t, "kvd to be healthy", func() error {
		select {
		case <-p.done:
			t.Fatalf("kvd exited: %v\n%s", p.err, p.output())
		default:
		}
		resp, err := http.Get("http://" + metrics + "/healthz")
		if err != nil {
			return fmt.Errorf("%v\n%s", err, p.output())
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d\n%s", resp.StatusCode, p.output())
		}
		return nil
	})
}

// TestStorageFullDiskProcess: kvd on a small tmpfs that fills up. The
// client's PUT fails promptly with "kvd: storage: ... no space left on
// device"; kvd exits non-zero naming the cause; restarted once there is
// room, it has every acknowledged PUT.
func TestStorageFullDiskProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	// Room for the Raft log's segments (64 MiB each, zero-filled when
	// made; every start begins a new one, and one spare is made ahead):
	// four of them over the test's three starts, and Pebble's files.
	mnt := storageMount(t, "-t", "tmpfs", "-o", "size=320m", "tmpfs")
	if mnt == "" {
		return
	}
	bin := buildKVD(t)
	listen, metrics := storageFreeAddr(t), storageFreeAddr(t)
	args := []string{"--data-dir", filepath.Join(mnt, "data"), "--listen", listen, "--initial-cluster", "1=" + listen, "--metrics-listen", metrics,
		"--table-mem", "64MiB", "--tick", "20ms"}
	p := startKVD(t, bin, args...)
	waitHealthy(t, p, metrics)
	c, err := client.New(client.Config{Endpoints: []string{listen}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acked := map[string]string{}
	if err, _ := storagePuts(t, c, "before", 50, 1000, acked); err != nil {
		t.Fatal(err)
	}
	filler := storageFill(t, mnt)
	err, took := storagePuts(t, c, "after", 20000, 4000, acked)
	checkStorageClientErr(t, err, took, "no space left on device")
	if code := p.exited(t, 10*time.Second); code == 0 {
		t.Fatalf("kvd exited 0 after the storage failure:\n%s", p.output())
	}
	out := p.output()
	t.Logf("kvd's output:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "kvd: ") || !strings.Contains(last, "no space left on device") {
		t.Errorf("kvd's last line %q does not name the cause", last)
	}
	if strings.Contains(out, "panic") || strings.Contains(out, "fatal error") {
		t.Errorf("kvd panicked")
	}
	if n := strings.Count(out, "level=ERROR"); n > 20 {
		t.Errorf("%d error lines: want a handful", n)
	}

	// A restart on the still full disk exits at once, naming the cause.
	p = startKVD(t, bin, args...)
	if code := p.exited(t, 10*time.Second); code == 0 || !strings.Contains(p.output(), "no space left on device") ||
		strings.Contains(p.output(), "kvd node started") {
		t.Fatalf("restart on the full disk: exit %d:\n%s", code, p.output())
	}
	t.Logf("restart on the full disk:\n%s", p.output())

	// Room again: the restarted node has everything acknowledged.
	os.Remove(filler)
	p = startKVD(t, bin, args...)
	waitHealthy(t, p, metrics)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for k, v := range acked {
		got, err := c.Get(ctx, []byte(k))
		if err != nil || string(got) != v {
			t.Fatalf("after the restart: %q = %d bytes, %v", k, len(got), err)
		}
	}
	t.Logf("%d acknowledged writes all there after the restart", len(acked))
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exited(t, 10*time.Second); code != 0 {
		t.Errorf("kvd exited %d on SIGTERM:\n%s", code, p.output())
	}
}

// TestStorageStartFails: kvd started on a read-only data directory (one
// that holds data, bind-mounted read-only) or on a full file system exits
// non-zero at once naming the cause, and never listens.
func TestStorageStartFails(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	ro := storageMount(t, "-t", "tmpfs", "-o", "size=160m", "tmpfs") // the read-only mount's source: room for the Raft log's segments
	full := storageMount(t, "-t", "tmpfs", "-o", "size=4m", "tmpfs")
	if ro == "" || full == "" {
		return
	}
	bin := buildKVD(t)
	listen, metrics := storageFreeAddr(t), storageFreeAddr(t)
	// A node with data, stopped cleanly.
	data := filepath.Join(ro, "data")
	p := startKVD(t, bin, "--data-dir", data, "--listen", listen, "--initial-cluster", "1="+listen, "--metrics-listen", metrics, "--tick", "20ms")
	waitHealthy(t, p, metrics)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exited(t, 10*time.Second); code != 0 {
		t.Fatalf("kvd exited %d on SIGTERM:\n%s", code, p.output())
	}
	roData := storageMount(t, "--bind", "-o", "ro", data)
	if roData == "" {
		return
	}
	storageFill(t, full)
	for _, tc := range []struct{ name, dir, want string }{
		{"read-only", roData, "read-only file system"},
		{"full", filepath.Join(full, "data"), "no space left on device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			p := startKVD(t, bin, "--data-dir", tc.dir, "--listen", listen, "--initial-cluster", "1="+listen, "--metrics-listen", metrics)
			code := p.exited(t, 10*time.Second)
			out := p.output()
			t.Logf("kvd exited %d after %v:\n%s", code, time.Since(start), out)
			if code == 0 || !strings.Contains(out, tc.want) || strings.Contains(out, "panic") {
				t.Fatalf("want a non-zero exit naming %q", tc.want)
			}
			if strings.Contains(out, "kvd node started") {
				t.Fatal("kvd started listening")
			}
		})
	}
}
