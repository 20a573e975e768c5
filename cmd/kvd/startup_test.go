package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// stopKVD ends p with SIGTERM and checks it exits 0.
func stopKVD(t *testing.T, p *kvdProc) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exited(t, 30*time.Second); code != 0 {
		t.Fatalf("kvd exited %d on SIGTERM:\n%s", code, p.output())
	}
}

// putGet puts key=val through listen (if val is not "") and checks it
// reads back val.
func putGet(t *testing.T, listen, key, val string) {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: []string{listen}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if val != "" {
		if err := c.Put(ctx, []byte(key), []byte(val)); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	got, err := c.Get(ctx, []byte(key))
	if err != nil || string(got) != "v" {
		t.Fatalf("get %s = %q, %v; want v", key, got, err)
	}
}

// lastLine is the last line kvd printed: its error, when it refused.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// TestNewDataDirNeedsCluster: a new data directory with neither
// --initial-cluster nor --join is refused in one line saying what to give
// (checkNewCluster), and left empty; it bootstrapped a single-node cluster
// of its own, silently. Given --initial-cluster 1=ADDR it starts, and a
// restart of that directory needs neither flag.
func TestNewDataDirNeedsCluster(t *testing.T) {
	kvd := buildKVD(t)
	addrs := kvdtest.FreeAddrs(t, 2)
	data := filepath.Join(t.TempDir(), "d")
	code, out := runKVD(t, kvd, 10*time.Second, "--data-dir", data, "--listen", addrs[0])
	want := fmt.Sprintf("kvd: --data-dir %s is new, and neither --initial-cluster nor --join is given: "+
		"give --initial-cluster 1=%s for a single-node cluster, or --join to join one", data, addrs[0])
	ents, _ := os.ReadDir(data)
	if code != 2 || strings.TrimSpace(out) != want || len(ents) != 0 {
		t.Fatalf("kvd on a new data dir without --initial-cluster: exit %d, %d entries in it, output:\n%s\nwant exit 2, no entries and only:\n%s",
			code, len(ents), out, want)
	}
	args := []string{"--data-dir", data, "--listen", addrs[0], "--metrics-listen", addrs[1], "--table-mem", "8MiB"}
	p := startKVD(t, kvd, append(args, "--initial-cluster", "1="+addrs[0])...)
	waitHealthy(t, p, addrs[1])
	putGet(t, addrs[0], "k", "v")
	stopKVD(t, p)
	p = startKVD(t, kvd, args...)
	waitHealthy(t, p, addrs[1])
	putGet(t, addrs[0], "k", "")
}

// TestJoinForeignDataDir: --join on a data directory that created a
// cluster of its own fails at once (exit 1) naming its cluster id and both
// ways out (raft's checkJoinTarget); it ran instead, refusing the members
// it was to join for as long as it lived. The directory is left usable:
// restarted without --join it serves its data.
func TestJoinForeignDataDir(t *testing.T) {
	kvd := buildKVD(t)
	addrs := kvdtest.FreeAddrs(t, 3)
	data := t.TempDir()
	args := []string{"--id", "2", "--data-dir", data, "--listen", addrs[0], "--metrics-listen", addrs[1], "--table-mem", "8MiB"}
	p := startKVD(t, kvd, append(args, "--initial-cluster", "2="+addrs[0])...)
	waitHealthy(t, p, addrs[1])
	putGet(t, addrs[0], "k", "v")
	_, rest, _ := strings.Cut(p.output(), "cluster_id=")
	clusterID, _, _ := strings.Cut(rest, "\n")
	if len(clusterID) != 16 {
		t.Fatalf("no cluster id recorded in the log:\n%s", p.output())
	}
	stopKVD(t, p)

	members := "1=" + addrs[2] + ",2=" + addrs[0]
	code, out := runKVD(t, kvd, 30*time.Second, append(args, "--join", "--initial-cluster", members)...)
	line := lastLine(out)
	for _, want := range []string{"data directory belongs to another cluster: --join, but " + data,
		"which member 2 created alone", "--initial-cluster " + members, "rm -rf " + data, "drop --join"} {
		if code != 1 || !strings.Contains(line, want) {
			t.Fatalf("kvd --join on a data dir with a cluster of its own: exit %d, last line %q; want exit 1 and %q\n%s",
				code, line, want, out)
		}
	}
	if !strings.Contains(line, "holds cluster "+clusterID) {
		t.Errorf("the refusal does not name the data dir's cluster %s: %s", clusterID, line)
	}
	p = startKVD(t, kvd, args...)
	waitHealthy(t, p, addrs[1])
	putGet(t, addrs[0], "k", "")
}

// TestLockedDataDir: a second kvd on a data directory a running one holds
// fails (exit 1) naming the directory and the holder's pid
// (checkDataDirFree), where it said "resource temporarily unavailable";
// the first goes on serving its data.
func TestLockedDataDir(t *testing.T) {
	kvd := buildKVD(t)
	addrs := kvdtest.FreeAddrs(t, 4)
	data := t.TempDir()
	first := startKVD(t, kvd, "--data-dir", data, "--listen", addrs[0], "--metrics-listen", addrs[1],
		"--initial-cluster", "1="+addrs[0], "--table-mem", "8MiB")
	waitHealthy(t, first, addrs[1])
	putGet(t, addrs[0], "k", "v")
	code, out := runKVD(t, kvd, 30*time.Second, "--data-dir", data, "--listen", addrs[2], "--metrics-listen", addrs[3],
		"--initial-cluster", "1="+addrs[2], "--table-mem", "8MiB")
	want := fmt.Sprintf("kvd: data dir %s is in use by another kvd (pid %d): stop it, or give this node another --data-dir",
		data, first.cmd.Process.Pid)
	if code != 1 || lastLine(out) != want {
		t.Fatalf("a second kvd on a held data dir: exit %d, output:\n%s\nwant exit 1 and %q", code, out, want)
	}
	waitHealthy(t, first, addrs[1])
	putGet(t, addrs[0], "k", "")
}

// TestVersionEverywhere: kvd --version, /version and kvd_build_info report
// one version (internal/version), and so does kvctl version.
func TestVersionEverywhere(t *testing.T) {
	bin := kvdtest.SharedBin(t)
	out, err := exec.Command(filepath.Join(bin, "kvd"), "--version").Output()
	first, _, _ := strings.Cut(string(out), "\n")
	ver, ok := strings.CutPrefix(first, "kvd Version: ")
	if err != nil || !ok || ver == "" || !strings.Contains(string(out), "Go Version: go") {
		t.Fatalf("kvd --version: %q, %v", out, err)
	}
	// KVD_VERSION is no flag's: kvd does not print its version and exit for it.
	env := exec.Command(filepath.Join(bin, "kvd"), "--data-dir", filepath.Join(t.TempDir(), "new"))
	env.Env = append(os.Environ(), "KVD_VERSION=true")
	if out, _ := env.CombinedOutput(); strings.Contains(string(out), "kvd Version:") || !strings.Contains(string(out), "names no flag") {
		t.Errorf("kvd with KVD_VERSION=true: %s; want no version, a warning naming KVD_VERSION", out)
	}
	out, err = exec.Command(filepath.Join(bin, "kvctl"), "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "kvctl version: "+ver+"\n") {
		t.Errorf("kvctl version: %q, %v; want kvctl version: %s", out, err, ver)
	}
	addrs := kvdtest.FreeAddrs(t, 2)
	p := startKVD(t, filepath.Join(bin, "kvd"), "--data-dir", t.TempDir(), "--listen", addrs[0],
		"--metrics-listen", addrs[1], "--initial-cluster", "1="+addrs[0], "--table-mem", "8MiB")
	waitHealthy(t, p, addrs[1])
	var v map[string]string
	if body := httpGet(t, "http://"+addrs[1]+"/version"); json.Unmarshal([]byte(body), &v) != nil || v["kvd"] != ver {
		t.Errorf("/version = %s; want {\"kvd\":%q,...}", body, ver)
	}
	metrics := httpGet(t, "http://"+addrs[1]+"/metrics")
	if !strings.Contains(metrics, "kvd_build_info{") || !strings.Contains(metrics, `version="`+ver+`"`) {
		t.Errorf("/metrics has no kvd_build_info with version %q", ver)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// TestFlagTypoOneLine: a flag typo is one line naming the flag and where
// the usage is (exit 2), where it printed the whole usage and the error
// twice; -h still prints the usage (exit 0).
func TestFlagTypoOneLine(t *testing.T) {
	kvd := buildKVD(t)
	code, out := runKVD(t, kvd, 10*time.Second, "--lisen", "127.0.0.1:7301")
	if want := "kvd: flag provided but not defined: -lisen (see kvd -h)\n"; code != 2 || out != want {
		t.Errorf("kvd --lisen: exit %d, output %q; want exit 2 and %q", code, out, want)
	}
	code, out = runKVD(t, kvd, 10*time.Second, "-h")
	if code != 0 || !strings.Contains(out, "-initial-cluster") {
		t.Errorf("kvd -h: exit %d, output %q; want the usage", code, out)
	}
}

// TestRaftLogMovesToWAL: a data directory whose Raft log is in Pebble
// (--raft-log=pebble, or an earlier kvd), restarted with the default
// (wal), keeps its data with the log moved to DIR/wal, and then restarts
// only in the wal mode: with --raft-log=pebble it is refused at once, exit
// 1, naming the flag to give.
func TestRaftLogMovesToWAL(t *testing.T) {
	kvd := buildKVD(t)
	addrs := kvdtest.FreeAddrs(t, 2)
	data := filepath.Join(t.TempDir(), "d")
	args := []string{"--data-dir", data, "--listen", addrs[0], "--metrics-listen", addrs[1], "--table-mem", "8MiB"}
	p := startKVD(t, kvd, append(args, "--initial-cluster", "1="+addrs[0], "--raft-log", "pebble")...)
	waitHealthy(t, p, addrs[1])
	putGet(t, addrs[0], "k", "v")
	stopKVD(t, p)
	if _, err := os.Stat(filepath.Join(data, "wal")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after a start with --raft-log=pebble: %s/wal: %v, want none", data, err)
	}
	// Converted by the default, then restarted as it is.
	for _, mode := range [][]string{nil, {"--raft-log", "wal"}} {
		p = startKVD(t, kvd, append(args, mode...)...)
		waitHealthy(t, p, addrs[1])
		putGet(t, addrs[0], "k", "")
		putGet(t, addrs[0], "k2", "v")
		stopKVD(t, p)
		if ents, err := os.ReadDir(filepath.Join(data, "wal")); err != nil || len(ents) == 0 {
			t.Fatalf("flags %q: no raft log in %s/wal: %v", mode, data, err)
		}
	}
	code, out := runKVD(t, kvd, 30*time.Second, append(args, "--raft-log", "pebble")...)
	if code != 1 || !strings.Contains(lastLine(out), "start it with --raft-log=wal") {
		t.Fatalf("kvd --raft-log pebble on a directory in the wal mode: exit %d, output:\n%s\nwant exit 1 naming --raft-log=wal", code, out)
	}
}
