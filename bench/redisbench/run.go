package redisbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kvd-project/kvd/bench/cluster"
	"github.com/kvd-project/kvd/bench/procstat"
)

// host is where every target listens: loopback only.
const host = "127.0.0.1"

// ErrInvocation: a redis-benchmark invocation failed (the report says
// which).
var ErrInvocation = errors.New("redisbench: redis-benchmark failed")

// target is one server redis-benchmark is pointed at.
type target struct {
	name string
	addr string
	// pids are the processes whose CPU the target's operations cost.
	pids []int
}

// Run starts the targets, runs every round and returns the report. With
// invocations that failed it returns the report of the others and an error
// wrapping ErrInvocation.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "kvbench-redis-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	bv, err := version(ctx, cfg.RedisBenchmark)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConfig, cfg.RedisBenchmark, err)
	}
	rep := &Report{Meta: Meta{Started: time.Now(), BenchmarkVersion: bv, Clients: cfg.Clients, Requests: cfg.Requests,
		DataSize: cfg.DataSize, Keyspace: cfg.Keyspace, Rounds: cfg.Rounds, Nodes: cfg.Nodes, CPUs: runtime.NumCPU()}}
	targets, stop, err := startTargets(ctx, cfg, dir, &rep.Meta)
	if err != nil {
		return nil, err
	}
	defer stop()
	rep.LoadBefore = procstat.LoadAvg()
	for round := range cfg.Rounds {
		for i := range targets {
			t := targets[(i+round)%len(targets)]
			for _, depth := range cfg.Pipelines {
				for _, test := range cfg.Tests {
					s, err := invoke(ctx, cfg, t, depth, test)
					if err != nil {
						rep.Errors = append(rep.Errors, fmt.Sprintf("round %d, %s, -P %d, %s: %v", round+1, t.name, depth, test, err))
						if ctx.Err() != nil {
							return rep, ctx.Err()
						}
						continue
					}
					s.Round = round + 1
					rep.Samples = append(rep.Samples, s)
					if cfg.Progress != nil {
						fmt.Fprintf(cfg.Progress, "redis: round %d %s -P %d %s: %.0f ops/s\n", s.Round, t.name, depth, s.Test, s.RPS)
					}
				}
			}
		}
	}
	rep.LoadAfter = procstat.LoadAvg()
	if len(rep.Errors) > 0 {
		return rep, fmt.Errorf("%w: %d invocations, the first: %s", ErrInvocation, len(rep.Errors), rep.Errors[0])
	}
	return rep, nil
}

// startTargets starts what cfg.Targets need, in their order, and waits
// until each acknowledges a SET. stop stops them all.
func startTargets(ctx context.Context, cfg Config, dir string, m *Meta) (targets []target, stop func(), err error) {
	var procs []*cluster.Process
	var kvd *cluster.Cluster
	// stopAll, not the named result: a failure returns stop as nil.
	stopAll := func() {
		for _, p := range procs {
			p.Stop()
		}
		if kvd != nil {
			kvd.Stop()
		}
	}
	defer func() {
		if err != nil {
			stopAll()
		}
	}()
	if containsAny(cfg.Targets, Gateway, Node) {
		if kvd, err = cluster.Start(ctx, cluster.Config{Bin: cfg.Bin, Nodes: cfg.Nodes, Redis: true,
			Dir: filepath.Join(dir, "kvd"), ReadyTimeout: cfg.ReadyTimeout}); err != nil {
			return nil, nil, err
		}
	}
	redisServer := ""
	if containsAny(cfg.Targets, Redis, RedisAOF) {
		if redisServer, m.ServerVersion, err = resolveRedisServer(ctx, cfg.RedisServer, dir); err != nil {
			return nil, nil, err
		}
	}
	for _, name := range cfg.Targets {
		var t target
		var p *cluster.Process
		if t, p, err = startTarget(cfg, name, kvd, redisServer, dir); err != nil {
			return nil, nil, fmt.Errorf("starting %s: %w", name, err)
		}
		if p != nil {
			procs = append(procs, p)
		}
		if err = waitReady(ctx, t.addr, cfg.ReadyTimeout, p); err != nil {
			return nil, nil, fmt.Errorf("%s on %s: %w", name, t.addr, err)
		}
		targets = append(targets, t)
	}
	return targets, stopAll, nil
}

// startTarget starts the process of the target name, if it has one of
// its own (a node's listener is the cluster's), and returns the target
// and that process (nil for a node, or when it could not start).
func startTarget(cfg Config, name string, kvd *cluster.Cluster, redisServer, dir string) (target, *cluster.Process, error) {
	t := target{name: name}
	var p *cluster.Process
	var err error
	switch name {
	case Node:
		t.addr, t.pids = kvd.RedisAddrs[0], kvd.PIDs()
		return t, nil, nil
	case Gateway:
		t.addr, p, err = startProcess(filepath.Join(cfg.Bin, "kvd"), func(addr string) []string {
			return []string{"gateway", "--endpoints", strings.Join(kvd.Endpoints, ","), "--redis-listen", addr,
				"--listen-client-urls", "", "--log-level", "warn"}
		})
		if p != nil {
			t.pids = append(kvd.PIDs(), p.PID())
		}
		return t, p, err
	case GoFloor:
		t.addr, p, err = startProcess(cfg.Kvbench, func(addr string) []string {
			return []string{"resp-floor", "--listen", addr}
		})
	case Redis, RedisAOF:
		data := filepath.Join(dir, name)
		if err = os.MkdirAll(data, 0o755); err != nil {
			return t, nil, err
		}
		persist := []string{"--appendonly", "no"}
		if name == RedisAOF {
			persist = []string{"--appendonly", "yes", "--appendfsync", "always"}
		}
		t.addr, p, err = startProcess(redisServer, func(addr string) []string {
			_, port, _ := net.SplitHostPort(addr)
			return append([]string{"--bind", host, "--port", port, "--save", "", "--dir", data, "--daemonize", "no"}, persist...)
		})
	}
	if p != nil {
		t.pids = []int{p.PID()}
	}
	return t, p, err
}

// startProcess starts bin on a free loopback port; args makes its
// arguments from the address.
func startProcess(bin string, args func(addr string) []string) (string, *cluster.Process, error) {
	addrs, err := cluster.FreeAddrs(host, 1)
	if err != nil {
		return "", nil, err
	}
	p, err := cluster.StartProcess(bin, args(addrs[0]))
	return addrs[0], p, err
}

// readyProbe is a RESP SET whose reply, +OK, shows that a target serves
// writes.
const readyProbe = "*3\r\n$3\r\nSET\r\n$13\r\nkvbench-ready\r\n$2\r\nok\r\n"

// waitReady retries readyProbe on addr until it is acknowledged, p (if
// not nil) exits, or timeout passes.
func waitReady(ctx context.Context, addr string, timeout time.Duration, p *cluster.Process) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = probe(ctx, addr); last == nil {
			return nil
		}
		var exited <-chan struct{}
		if p != nil {
			exited = p.Done()
		}
		select {
		case <-exited:
			return fmt.Errorf("exited (%v); its last output:\n%s", p.Err(), p.Output())
		case <-ctx.Done():
			out := ""
			if p != nil {
				out = "; its last output:\n" + p.Output()
			}
			return fmt.Errorf("not ready after %v: %w%s", timeout, last, out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func probe(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(readyProbe)); err != nil {
		return err
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if reply := string(buf[:n]); reply != "+OK\r\n" {
		return fmt.Errorf("SET answered %q", reply)
	}
	return nil
}

// invoke runs redis-benchmark once: one test against t at depth, charging
// the target's processes' CPU over the invocation to it.
func invoke(ctx context.Context, cfg Config, t target, depth int, test string) (Sample, error) {
	h, port, err := net.SplitHostPort(t.addr)
	if err != nil {
		return Sample{}, err
	}
	args := []string{"-h", h, "-p", port, "-c", strconv.Itoa(cfg.Clients), "-n", strconv.Itoa(cfg.Requests),
		"-d", strconv.Itoa(cfg.DataSize), "-P", strconv.Itoa(depth), "-t", test, "--csv"}
	if cfg.Keyspace > 0 {
		args = append(args, "-r", strconv.Itoa(cfg.Keyspace))
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cfg.RedisBenchmark, args...)
	stdout, stderr := &capped{max: maxCSVBytes + 1}, &capped{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cpu0, err := procstat.Total(t.pids)
	if err != nil {
		return Sample{}, fmt.Errorf("server CPU: %w", err)
	}
	if err := cmd.Run(); err != nil {
		return Sample{}, fmt.Errorf("%w: %w; stderr: %q", ErrInvocation, err, stderr.String())
	}
	cpu1, err := procstat.Total(t.pids)
	if err != nil {
		return Sample{}, fmt.Errorf("server CPU: %w", err)
	}
	res, err := ParseCSV(bytes.NewReader(stdout.Bytes()))
	if err != nil {
		return Sample{}, fmt.Errorf("%w; stderr: %q", err, stderr.String())
	}
	if len(res) != 1 {
		return Sample{}, fmt.Errorf("%w: -t %s gave %d tests, want 1", ErrCSV, test, len(res))
	}
	return Sample{Target: t.name, Pipeline: depth, Requests: cfg.Requests, Result: res[0], ServerCPU: cpu1 - cpu0}, nil
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// resolveRedisServer finds the redis-server to run (Config.RedisServer)
// and checks that it is one: its --version must say "Redis server".
func resolveRedisServer(ctx context.Context, path, dir string) (bin, ver string, err error) {
	bin = path
	if bin == "" {
		if bin, err = exec.LookPath("redis-server"); err != nil {
			rdb, lerr := exec.LookPath("redis-check-rdb")
			if lerr != nil {
				return "", "", fmt.Errorf("%w: no redis-server and no redis-check-rdb in PATH (scripts/deps.sh installs redis-tools)", ErrConfig)
			}
			bin = filepath.Join(dir, "redis-server")
			if err = os.Symlink(rdb, bin); err != nil {
				return "", "", err
			}
		}
	}
	if ver, err = version(ctx, bin); err != nil {
		return "", "", fmt.Errorf("%w: %s: %w", ErrConfig, bin, err)
	}
	if !strings.HasPrefix(ver, "Redis server") {
		return "", "", fmt.Errorf("%w: %s --version says %q, not Redis server", ErrConfig, bin, ver)
	}
	// "Redis server v=7.0.15 sha=... malloc=... build=...": the version
	// is enough for the report.
	if f := strings.Fields(ver); len(f) > 3 {
		ver = strings.Join(f[:3], " ")
	}
	return bin, ver, nil
}

// version is bin --version's first line.
func version(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line, nil
}
