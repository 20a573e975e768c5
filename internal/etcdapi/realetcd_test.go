package etcdapi_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// startEtcd runs a fresh one-member etcd, Debian's server binary that
// scripts/deps.sh unpacks into bin/etcd, on loopback ports until the test
// ends, and returns a clientv3 client of it: the reference kvd's answers
// are compared with. A missing binary fails the test.
func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the reference etcd server is missing (%v): run scripts/deps.sh", err)
	}
	addrs := kvdtest.FreeAddrs(t, 2)
	client, peer := "http://"+addrs[0], "http://"+addrs[1]
	cmd := exec.Command(bin, "--name", "ref", "--data-dir", t.TempDir(),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "ref="+peer, "--logger", "zap", "--log-level", "error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	})
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addrs[0]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	wait.NoError(t, "the reference etcd", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Status(ctx, addrs[0])
		return err
	})
	return c
}
