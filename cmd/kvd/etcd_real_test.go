package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// etcdServerBin is Debian's etcd server binary (3.4), which
// scripts/deps.sh unpacks into bin/etcd. A missing one fails the test.
func etcdServerBin(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../bin/etcd")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the etcd server binary is missing (%v): run scripts/deps.sh", err)
	}
	return p
}

// startRealEtcd starts a 3-member etcd cluster from bin on ephemeral
// loopback ports, its data in the test's temporary directories, kills it
// when the test ends, and returns its client endpoints (host:port) once a
// put through each answers.
func startRealEtcd(t *testing.T, bin, ctl string) []string {
	t.Helper()
	addrs := kvdtest.FreeAddrs(t, 6)
	peers, clients := addrs[:3], addrs[3:]
	var initial []string
	for i, p := range peers {
		initial = append(initial, fmt.Sprintf("m%d=http://%s", i+1, p))
	}
	for i := range peers {
		startEtcdMember(t, bin, fmt.Sprintf("m%d", i+1), peers[i], clients[i], strings.Join(initial, ","))
	}
	for _, ep := range clients {
		c := etcdctlAt(t, ctl, ep)
		wait.NoError(t, "a put through etcd member "+ep, func() error {
			if _, stderr, err := c.run("", "put", "etcd-diff-probe", "ok"); err != nil {
				return fmt.Errorf("%v: %s", err, stderr)
			}
			return nil
		})
	}
	return clients
}

// startEtcdMember runs one member of a new etcd cluster until the test
// ends; its output is logged if the test fails.
func startEtcdMember(t *testing.T, bin, name, peer, client, initial string) {
	t.Helper()
	logs := &syncBuffer{}
	cmd := exec.Command(bin,
		"--name", name, "--data-dir", t.TempDir(),
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--initial-cluster", initial, "--initial-cluster-state", "new", "--initial-cluster-token", "kvd-diff",
		"--logger", "zap", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("etcd member %s's output:\n%s", name, logs.String())
		}
	})
}
