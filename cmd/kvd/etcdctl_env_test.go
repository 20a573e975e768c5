package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// etcdctls are the etcdctl builds the etcd API tests run unmodified:
// Debian's etcd-client (3.4) and 3.7 from the module proxy, both
// installed by scripts/deps.sh. A missing one fails the test.
func etcdctls(t *testing.T) map[string]string {
	t.Helper()
	v37, err := filepath.Abs("../../bin/etcdctl-3.7")
	if err != nil {
		t.Fatal(err)
	}
	bins := map[string]string{"3.4": "/usr/bin/etcdctl", "3.7": v37}
	for v, p := range bins {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("etcdctl %s is missing (%v): run scripts/deps.sh", v, err)
		}
	}
	return bins
}

// etcdEnv is a 3-node kvd process cluster serving etcd's API on each
// node's --listen-client-urls, and a `kvd gateway` process in front of it.
type etcdEnv struct {
	bin      string
	pc       *kvdtest.ProcCluster
	nodeURLs []string // host:port, node i+1's
	gateway  string   // host:port
	redis    string   // host:port of the gateway's Redis listener
	gwLogs   *syncBuffer
}

// startEtcdEnv starts the cluster and the gateway, and waits until a put
// through each answers.
func startEtcdEnv(t *testing.T, ctl string) *etcdEnv {
	t.Helper()
	bin := kvdtest.SharedBin(t)
	addrs := kvdtest.FreeAddrs(t, 5)
	e := &etcdEnv{bin: bin, nodeURLs: addrs[:3], gateway: addrs[3], redis: addrs[4]}
	e.pc = kvdtest.StartProcClusterOpts(t, bin, 3, kvdtest.ProcOptions{
		PerNode: func(id uint64) []string { return []string{"--listen-client-urls", "http://" + addrs[id-1]} },
	})
	e.gwLogs = startGateway(t, "--endpoints", strings.Join(e.pc.Endpoints(), ","), "--listen-client-urls", "http://"+e.gateway, "--redis-listen", e.redis)
	for _, ep := range append(e.nodeURLs, e.gateway) {
		c := etcdctlAt(t, ctl, ep)
		wait.NoError(t, "a put through "+ep, func() error {
			_, stderr, err := c.run("", "put", "etcd-e2e-probe", "ok")
			if err != nil {
				return fmt.Errorf("%v: %s", err, stderr)
			}
			return nil
		})
	}
	return e
}

// startGateway runs `kvd gateway` with args until the test ends, and
// returns its output.
func startGateway(t *testing.T, args ...string) *syncBuffer {
	t.Helper()
	logs := &syncBuffer{}
	gw := exec.Command(filepath.Join(kvdtest.SharedBin(t), "kvd"), append([]string{"gateway", "--log-level", "warn"}, args...)...)
	gw.Stdout, gw.Stderr = logs, logs
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { gw.Wait(); close(done) }()
	t.Cleanup(func() {
		gw.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("kvd gateway's output:\n%s", logs.String())
		}
	})
	return logs
}

// etcdctl runs one etcdctl build against endpoints.
type etcdctl struct {
	t         *testing.T
	bin       string
	endpoints string
}

func etcdctlAt(t *testing.T, bin string, endpoints ...string) etcdctl {
	return etcdctl{t: t, bin: bin, endpoints: strings.Join(endpoints, ",")}
}

// etcdctlTimeout bounds one etcdctl run: its own --command-timeout is
// 5s, and check perf runs for 60s.
const etcdctlTimeout = 3 * time.Minute

// run runs etcdctl with args and stdin, returning its stdout and stderr.
func (c etcdctl) run(stdin string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdctlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"--endpoints", c.endpoints}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// ok runs etcdctl and fails the test unless it succeeds; it returns
// stdout.
func (c etcdctl) ok(args ...string) string {
	c.t.Helper()
	out, stderr, err := c.run("", args...)
	if err != nil {
		c.t.Fatalf("etcdctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// want runs etcdctl and checks its stdout, as etcd prints it (trailing
// newlines aside).
func (c etcdctl) want(want string, args ...string) {
	c.t.Helper()
	c.wantIn("", want, args...)
}

// wantIn is want with stdin.
func (c etcdctl) wantIn(stdin, want string, args ...string) {
	c.t.Helper()
	out, stderr, err := c.run(stdin, args...)
	if err != nil {
		c.t.Errorf("etcdctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr)
		return
	}
	if got, w := strings.TrimRight(out, "\n"), strings.TrimRight(want, "\n"); got != w {
		c.t.Errorf("etcdctl %s printed:\n%s\nwant:\n%s", strings.Join(args, " "), got, w)
	}
}

// match runs etcdctl and checks that stdout matches the regexp re (whole
// output, trailing newlines aside); it returns the submatches.
func (c etcdctl) match(re string, args ...string) []string {
	c.t.Helper()
	out := strings.TrimRight(c.ok(args...), "\n")
	m := regexp.MustCompile(`^(?s:` + re + `)$`).FindStringSubmatch(out)
	if m == nil {
		c.t.Fatalf("etcdctl %s printed:\n%s\nwant a match of:\n%s", strings.Join(args, " "), out, re)
	}
	return m
}

// fails runs etcdctl and checks that it fails, saying wantErr on stderr.
func (c etcdctl) fails(wantErr string, args ...string) {
	c.t.Helper()
	out, stderr, err := c.run("", args...)
	if err == nil || !strings.Contains(stderr, wantErr) {
		c.t.Errorf("etcdctl %s: err %v, stderr:\n%s\nstdout:\n%s\nwant a failure saying %q", strings.Join(args, " "), err, stderr, out, wantErr)
	}
}

// watch runs etcdctl watch with args until its stdout is want, then ends
// it; the test fails if it is not within wait's bound.
func (c etcdctl) watch(want string, args ...string) {
	c.t.Helper()
	cmd := exec.Command(c.bin, append([]string{"--endpoints", c.endpoints, "watch"}, args...)...)
	var out, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	want = strings.TrimRight(want, "\n")
	wait.Within(c.t, 20*time.Second, "etcdctl watch "+strings.Join(args, " ")+" to print:\n"+want, func() bool {
		got := strings.TrimRight(out.String(), "\n")
		if len(got) > len(want) || !strings.HasPrefix(want, got) {
			c.t.Fatalf("etcdctl watch %s printed:\n%s\nwant:\n%s\nstderr:\n%s", strings.Join(args, " "), got, want, stderr.String())
		}
		return got == want
	})
}
