package etcdseries

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvd-project/kvd/bench/cluster"
)

// ErrNotReady: a process exited while starting, or its cluster served no
// write in time.
var ErrNotReady = errors.New("etcdseries: not ready")

// readyTimeout bounds waiting for a started cluster's first write.
const readyTimeout = 60 * time.Second

// Procs are processes the series started, with their etcd client URLs.
type Procs struct {
	Endpoints []string // host:port of each etcd API listener
	procs     []*exec.Cmd
	done      []chan struct{}
	logs      []*os.File
}

// StartEtcd starts an etcd cluster of n members from the etcd binary,
// with data (fsync on: etcd's default) under dir and every port a free
// loopback one, and waits until it commits a write.
func StartEtcd(ctx context.Context, etcd, dir string, n int) (*Procs, error) {
	addrs, err := cluster.FreeAddrs("127.0.0.1", 2*n)
	if err != nil {
		return nil, err
	}
	initial := make([]string, n)
	for i := range n {
		initial[i] = fmt.Sprintf("m%d=http://%s", i+1, addrs[n+i])
	}
	p := &Procs{}
	for i := range n {
		client, peer := "http://"+addrs[i], "http://"+addrs[n+i]
		args := []string{"--name", fmt.Sprintf("m%d", i+1), "--data-dir", filepath.Join(dir, fmt.Sprintf("etcd%d", i+1)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "kvd-bench", "--logger", "zap", "--log-level", "warn"}
		if err := p.start(filepath.Join(dir, fmt.Sprintf("etcd%d.log", i+1)), etcd, args...); err != nil {
			p.Stop()
			return nil, err
		}
		p.Endpoints = append(p.Endpoints, addrs[i])
	}
	if err := p.waitReady(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// StartGateway starts `kvd gateway` for the kvd cluster at endpoints,
// serving etcd's API on a free loopback port, and waits until a write
// through it commits.
func StartGateway(ctx context.Context, kvd, dir string, endpoints []string) (*Procs, error) {
	addr, err := cluster.FreeAddrs("127.0.0.1", 1)
	if err != nil {
		return nil, err
	}
	p := &Procs{Endpoints: addr}
	if err := p.start(filepath.Join(dir, "gateway.log"), kvd, "gateway", "--endpoints", strings.Join(endpoints, ","),
		"--listen-client-urls", "http://"+addr[0], "--log-level", "warn"); err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// start runs bin with its output in logFile.
func (p *Procs) start(logFile, bin string, args ...string) error {
	f, err := os.Create(logFile)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.procs, p.done, p.logs = append(p.procs, cmd), append(p.done, done), append(p.logs, f)
	return nil
}

// waitReady puts RangeKey (ValueSize bytes: the range points' key) until
// it is committed, a process exits, or readyTimeout passes.
func (p *Procs) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: p.Endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	value := strings.Repeat("v", ValueSize)
	for {
		if exited := p.exited(); exited != "" {
			return fmt.Errorf("%w: %s", ErrNotReady, exited)
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.Put(pctx, RangeKey, value)
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w after %v: %w (logs: %s)", ErrNotReady, readyTimeout, err, p.logNames())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (p *Procs) exited() string {
	for i, d := range p.done {
		select {
		case <-d:
			return fmt.Sprintf("%s exited: %v (its output: %s)", p.procs[i].Path, p.procs[i].ProcessState, p.logs[i].Name())
		default:
		}
	}
	return ""
}

func (p *Procs) logNames() string {
	var names []string
	for _, f := range p.logs {
		names = append(names, f.Name())
	}
	return strings.Join(names, ", ")
}

// Stop terminates the processes (SIGTERM, then SIGKILL after 10 s).
func (p *Procs) Stop() {
	var wg sync.WaitGroup
	for i, cmd := range p.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done[i]:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-p.done[i]
			}
			p.logs[i].Close()
		}()
	}
	wg.Wait()
	p.procs, p.done, p.logs = nil, nil, nil
}

// WaitReady waits until etcd's API at endpoints (processes the series did
// not start, such as kvd nodes' listeners) commits a write of RangeKey.
func WaitReady(ctx context.Context, endpoints []string) error {
	return (&Procs{Endpoints: endpoints}).waitReady(ctx)
}
