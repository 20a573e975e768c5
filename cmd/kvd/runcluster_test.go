package main_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// freeRun returns a base port with the three ports from it free, and a
// metrics and a Redis base port likewise, for scripts/run-cluster.sh.
func freeRun(t *testing.T) (base, metrics, redis int) {
	t.Helper()
	free3 := func() int {
		for range 50 {
			_, p, _ := net.SplitHostPort(kvdtest.FreeAddrs(t, 1)[0])
			var b int
			fmt.Sscan(p, &b)
			ok := b+2 < 65536
			for i := 0; ok && i < 3; i++ {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", b+i))
				if ok = err == nil; ok {
					ln.Close()
				}
			}
			if ok {
				return b
			}
		}
		t.Fatal("no three consecutive free ports")
		return 0
	}
	return free3(), free3(), free3()
}

// TestRunClusterScript: `make run` (scripts/run-cluster.sh) prints its
// nodes' lines at info without raft's internals and without warning of its
// own KVD_RUN_* settings, then how to use the cluster; etcdctl (Debian's
// 3.4) puts and gets through the etcd API it serves; SIGINT (Ctrl-C)
// stops the nodes cleanly and the script exits 0, where make reported
// "Error 130".
func TestRunClusterScript(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	etcdctl := etcdctls(t)["3.4"]
	bin := kvdtest.SharedBin(t)
	base, metrics, redis := freeRun(t)
	etcdAddrs := kvdtest.FreeAddrs(t, 3)
	var etcdPorts []string
	for _, a := range etcdAddrs {
		_, p, _ := net.SplitHostPort(a)
		etcdPorts = append(etcdPorts, p)
	}
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command("../../scripts/run-cluster.sh", bin, data)
	cmd.Env = append(os.Environ(), fmt.Sprintf("KVD_RUN_BASE_PORT=%d", base), fmt.Sprintf("KVD_RUN_METRICS_PORT=%d", metrics),
		fmt.Sprintf("KVD_RUN_REDIS_PORT=%d", redis), "KVD_RUN_ETCD_PORTS="+strings.Join(etcdPorts, ","))
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped { // the script stops its nodes on SIGTERM
			cmd.Process.Signal(syscall.SIGTERM)
			<-done
		}
	})
	wait.For(t, "the script to say the cluster is running", func() bool {
		return strings.Contains(out.String(), "Press Ctrl-C to stop all three nodes")
	})
	checkRedis(t, redis)
	c := etcdctlAt(t, etcdctl, etcdAddrs[0])
	c.want("OK", "put", "a", "b")
	c = etcdctlAt(t, etcdctl, etcdAddrs...)
	c.want("a\nb", "get", "a")
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Fatalf("run-cluster.sh on SIGINT: %v (want exit 0):\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("run-cluster.sh still running 60s after SIGINT:\n%s", out.String())
	}
	got := out.String()
	endpoints := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", base, base+1, base+2)
	for _, want := range []string{"endpoints: " + endpoints, fmt.Sprintf("redis:     127.0.0.1:%d", redis), "etcdctl --endpoints=" + etcdAddrs[0] + " put a b", "kvctl --endpoints " + endpoints + " put hello world",
		"Press Ctrl-C", `[node1] `, `msg="leader elected"`, `msg="shutting down"`, "stopped; data kept in"} {
		if !strings.Contains(got, want) {
			t.Errorf("run-cluster.sh output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"component=etcd-raft", "names no flag"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("run-cluster.sh output has %q:\n%s", unwanted, got)
		}
	}
}

// checkRedis: node 1 serves the Redis protocol on the port given, as
// `make run` documents (redis-cli -p 6379 set a b && redis-cli -p 6379 get a).
func checkRedis(t *testing.T, port int) {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is not installed (run scripts/deps.sh): %v", err)
	}
	p := fmt.Sprint(port)
	for _, c := range []struct {
		args []string
		want string
	}{{[]string{"set", "a", "b"}, "OK"}, {[]string{"get", "a"}, "b"}} {
		out, err := exec.Command(cli, append([]string{"-p", p}, c.args...)...).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != c.want {
			t.Errorf("redis-cli -p %s %q: %q %v, want %q", p, c.args, out, err, c.want)
		}
	}
}
