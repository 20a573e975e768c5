package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/cli"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/tlsutil"
)

// Sentinel errors.
var (
	// ErrConfig: the Config is unusable.
	ErrConfig = errs.ErrConfig
	// ErrNotReady: the cluster did not serve a write in time, or a node
	// exited while starting.
	ErrNotReady = errors.New("cluster: not ready")
)

// Config describes the cluster to start.
type Config struct {
	// Bin is the directory holding the kvd binary. Required.
	Bin string
	// Nodes is the cluster size. Default 3.
	Nodes int
	// Transport is passed to kvd --transport and used by the readiness
	// probe. Default "tcp".
	Transport string
	// Host is the address nodes listen on. Default 127.0.0.1 (the RDMA VM
	// uses its rxe device's address, 127.1.0.1).
	Host string
	// TableMem is kvd --table-mem ("512MiB"); empty: kvd's default.
	TableMem string
	// Dir holds the nodes' data directories. Default: a temporary
	// directory that Stop removes.
	Dir string
	// Args are extra kvd flags for every node.
	Args []string
	// NodeArgs are extra kvd flags of node i+1 alone (after Args), for
	// flags whose values differ per node, such as --listen-client-urls.
	NodeArgs [][]string
	// TLS turns TLS on (tcp only): Start generates a client CA, a peer CA
	// and their certificates into Dir/tls, starts the nodes with both
	// --client-cert-auth and --peer-client-cert-auth, and Certs names the
	// client's files.
	TLS bool
	// ReadyTimeout bounds waiting for the cluster to serve a write. Default
	// 30s.
	ReadyTimeout time.Duration
	// Pprof starts every node with --enable-pprof and --metrics-listen on
	// a free port of Host (Cluster.MetricsAddrs).
	Pprof bool
	// Redis starts every node with --redis-listen on a free port of Host
	// (Cluster.RedisAddrs).
	Redis bool
}

// Defaults.
const (
	DefaultNodes        = 3
	DefaultReadyTimeout = 30 * time.Second
	// logTail is how much of each node's output is kept to explain a
	// failure.
	logTail = 16 << 10
)

// withDefaults returns c with its unset fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.Transport == "" {
		c.Transport = "tcp"
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	return c
}

// Validate reports whether c is usable. Unset fields are checked as their
// defaults; c itself is not changed.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.Bin == "" {
		return fmt.Errorf("%w: no bin directory", ErrConfig)
	}
	if c.Nodes < 1 || c.Nodes > 9 {
		return fmt.Errorf("%w: %d nodes (1..9)", ErrConfig, c.Nodes)
	}
	if len(c.NodeArgs) > c.Nodes {
		return fmt.Errorf("%w: flags for %d nodes in a cluster of %d", ErrConfig, len(c.NodeArgs), c.Nodes)
	}
	if c.TLS && c.Transport != "tcp" {
		return fmt.Errorf("%w: TLS needs the tcp transport, not %s", ErrConfig, c.Transport)
	}
	return nil
}

// Cluster is a running set of kvd processes.
type Cluster struct {
	Endpoints []string
	// MetricsAddrs are the nodes' metrics listeners (serving
	// /debug/pprof/), with Config.Pprof; else nil.
	MetricsAddrs []string
	// RedisAddrs are the nodes' Redis listeners, with Config.Redis; else
	// nil.
	RedisAddrs []string
	// Certs are the generated TLS files, with Config.TLS; else nil.
	Certs  *Certs
	cfg    Config
	dir    string
	ownDir bool
	nodes  []*Process
}

// Start launches the nodes and waits until the cluster commits a write.
// On failure it stops whatever it started.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kvd := filepath.Join(cfg.Bin, "kvd")
	if _, err := os.Stat(kvd); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c := &Cluster{cfg: cfg, dir: cfg.Dir}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "kvbench-cluster-")
		if err != nil {
			return nil, err
		}
		c.dir, c.ownDir = d, true
	}
	addrs, err := FreeAddrs(cfg.Host, cfg.Nodes)
	if err != nil {
		c.Stop()
		return nil, err
	}
	c.Endpoints = addrs
	if cfg.Pprof {
		if c.MetricsAddrs, err = FreeAddrs(cfg.Host, cfg.Nodes); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if cfg.Redis {
		if c.RedisAddrs, err = FreeAddrs(cfg.Host, cfg.Nodes); err != nil {
			c.Stop()
			return nil, err
		}
	}
	var tlsArgs []string
	if cfg.TLS {
		if c.Certs, err = GenerateCerts(filepath.Join(c.dir, "tls"), cfg.Host); err != nil {
			c.Stop()
			return nil, err
		}
		tlsArgs = c.Certs.ServerArgs()
	}
	members := make([]string, len(addrs))
	for i, a := range addrs {
		members[i] = fmt.Sprintf("%d=%s", i+1, a)
	}
	for i, a := range addrs {
		args := []string{"--id", strconv.Itoa(i + 1), "--listen", a, "--initial-cluster", strings.Join(members, ","),
			"--data-dir", filepath.Join(c.dir, fmt.Sprintf("node%d", i+1)), "--transport", cfg.Transport, "--log-level", "warn"}
		if cfg.TableMem != "" {
			args = append(args, "--table-mem", cfg.TableMem)
		}
		if cfg.Pprof {
			args = append(args, "--metrics-listen", c.MetricsAddrs[i], "--enable-pprof")
		}
		if cfg.Redis {
			args = append(args, "--redis-listen", c.RedisAddrs[i])
		}
		args = append(args, tlsArgs...)
		args = append(args, cfg.Args...)
		if i < len(cfg.NodeArgs) {
			args = append(args, cfg.NodeArgs[i]...)
		}
		n, err := StartProcess(kvd, args)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	if err := c.waitReady(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// FreeAddrs returns n addresses on host whose ports were free a moment
// ago.
func FreeAddrs(host string, n int) ([]string, error) {
	out := make([]string, 0, n)
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("%w: no free port on %s: %w", ErrConfig, host, err)
		}
		lns = append(lns, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// waitReady retries a probe PUT until it is committed, a node exits, or
// ReadyTimeout passes.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	ctx, exited := context.WithCancelCause(ctx)
	defer exited(nil)
	for i, n := range c.nodes {
		go func() {
			select {
			case <-n.done:
				exited(fmt.Errorf("%w: node %d exited (%v):\n%s", ErrNotReady, i+1, n.err, n.out))
			case <-ctx.Done():
			}
		}()
	}
	tf := cli.TransportFlags{Name: c.cfg.Transport}
	if c.Certs != nil {
		st, err := tlsutil.NewClient(c.Certs.ClientFiles())
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		tf.TLS = st.TCP()
	}
	tr, err := tf.Transport("")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer tr.Close()
	// Each probe may take a tenth of the wait (at least 2 s): an RDMA
	// connect on a loaded, emulated machine (the Soft-RoCE VM) can take
	// seconds, and a probe that always times out would never succeed.
	probe := max(2*time.Second, c.cfg.ReadyTimeout/10)
	cl, err := client.New(client.Config{Endpoints: c.Endpoints, Transport: tr, DialTimeout: probe / 2, RequestTimeout: probe})
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		pctx, pcancel := context.WithTimeout(ctx, probe)
		err := cl.Put(pctx, []byte("kvbench-ready"), []byte("ok"))
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if cause := context.Cause(ctx); errors.Is(cause, ErrNotReady) {
				return cause
			}
			return fmt.Errorf("%w after %v: %w; node 1 says:\n%s", ErrNotReady, c.cfg.ReadyTimeout, err, c.nodes[0].out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PIDs are the nodes' process ids.
func (c *Cluster) PIDs() []int {
	out := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.cmd.Process.Pid
	}
	return out
}

// Exited describes every node that is no longer running, with the tail of
// its output; "" if all are up.
func (c *Cluster) Exited() string {
	var b strings.Builder
	for i, n := range c.nodes {
		select {
		case <-n.done:
			fmt.Fprintf(&b, "node %d (pid %d) exited: %v; its last output:\n%s\n", i+1, n.cmd.Process.Pid, n.err, n.out)
		default:
		}
	}
	return b.String()
}

// Dir is where the nodes keep their data.
func (c *Cluster) Dir() string { return c.dir }

// Logs returns the tail of node i's output (0-based).
func (c *Cluster) Logs(i int) string { return c.nodes[i].out.String() }

// Stop terminates every node (SIGTERM, then SIGKILL after 10 s) and
// removes the data directory if Start made it. It may be called more than
// once.
func (c *Cluster) Stop() error {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.Stop()
		}()
	}
	wg.Wait()
	c.nodes = nil
	if c.ownDir {
		return os.RemoveAll(c.dir)
	}
	return nil
}
