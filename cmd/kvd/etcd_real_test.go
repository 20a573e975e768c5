package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
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
// put through each answers. A port taken by another process between
// FreeAddrs and etcd's bind (a shared machine) makes a member exit: the
// cluster is then started again on other ports.
func startRealEtcd(t *testing.T, bin, ctl string) []string {
	t.Helper()
	for try := 1; ; try++ {
		clients, members, err := tryStartEtcd(t, bin, ctl)
		if err == nil {
			t.Cleanup(func() { stopEtcd(t, members) })
			return clients
		}
		stopEtcd(t, members)
		if try == etcdStartTries {
			for _, m := range members {
				t.Logf("etcd member %s's output:\n%s", m.name, m.logs.String())
			}
			t.Fatalf("etcd cluster: %v", err)
		}
		t.Logf("etcd cluster: %v; starting it again on other ports", err)
	}
}

// etcdStartTries bounds startRealEtcd's attempts.
const etcdStartTries = 3

// etcdMember is one running etcd member.
type etcdMember struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	logs *syncBuffer
}

// exited reports whether the member's process has ended.
func (m *etcdMember) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// stopEtcd kills members; their output is logged if the test failed.
func stopEtcd(t *testing.T, members []*etcdMember) {
	for _, m := range members {
		m.cmd.Process.Signal(syscall.SIGKILL)
		<-m.done
		if t.Failed() {
			t.Logf("etcd member %s's output:\n%s", m.name, m.logs.String())
		}
	}
}

// tryStartEtcd starts the cluster once and waits until a put through each
// member answers, or a member exits, or wait's bound passes.
func tryStartEtcd(t *testing.T, bin, ctl string) ([]string, []*etcdMember, error) {
	t.Helper()
	addrs := kvdtest.FreeAddrs(t, 6)
	peers, clients := addrs[:3], addrs[3:]
	var initial []string
	for i, p := range peers {
		initial = append(initial, fmt.Sprintf("m%d=http://%s", i+1, p))
	}
	var members []*etcdMember
	for i := range peers {
		m, err := startEtcdMember(bin, fmt.Sprintf("m%d", i+1), peers[i], clients[i], strings.Join(initial, ","), t.TempDir())
		if err != nil {
			return nil, members, err
		}
		members = append(members, m)
	}
	deadline := time.Now().Add(etcdStartBound)
	for _, ep := range clients {
		c := etcdctlAt(t, ctl, ep)
		for {
			_, stderr, err := c.run("", "--command-timeout", "2s", "put", "etcd-diff-probe", "ok")
			if err == nil {
				break
			}
			for _, m := range members {
				if m.exited() {
					return nil, members, fmt.Errorf("member %s exited", m.name)
				}
			}
			if time.Now().After(deadline) {
				return nil, members, fmt.Errorf("no put through %s within %v: %v: %s", ep, etcdStartBound, err, stderr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return clients, members, nil
}

// etcdStartBound bounds the wait for a started cluster to answer.
const etcdStartBound = time.Minute

// startEtcdMember starts one member of a new etcd cluster.
func startEtcdMember(bin, name, peer, client, initial, dir string) (*etcdMember, error) {
	m := &etcdMember{name: name, done: make(chan struct{}), logs: &syncBuffer{}}
	m.cmd = exec.Command(bin,
		"--name", name, "--data-dir", dir,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--initial-cluster", initial, "--initial-cluster-state", "new", "--initial-cluster-token", "kvd-diff",
		"--logger", "zap", "--log-level", "warn")
	m.cmd.Stdout, m.cmd.Stderr = m.logs, m.logs
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { m.cmd.Wait(); close(m.done) }()
	return m, nil
}
