package floor

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/bench/procstat"
	"github.com/kvd-project/kvd/internal/errs"
)

// Defaults of Config.
const (
	DefaultWarmup   = time.Second
	DefaultDuration = 8 * time.Second
)

// ErrConfig wraps every invalid-configuration error of this package.
var ErrConfig = errs.ErrConfig

// Config configures a floor run.
type Config struct {
	// Nodes is the cluster size (one leader, Nodes-1 followers). Default 3.
	Nodes int
	// Clients is how many connections, each with one request in flight.
	// Default 64.
	Clients int
	// ValueSize and KeySize make up a request's payload. Defaults 256, 16.
	ValueSize, KeySize int
	// Warmup runs before the measured Duration. Defaults 1 s and 8 s.
	Warmup, Duration time.Duration
	// NoSync skips the fdatasyncs, to show what the disk costs.
	NoSync bool
	// Pebble logs to Pebble as kvd's store does (PebbleLog) instead of a
	// plain file: the floor of a design with the Raft log and the state in
	// Pebble.
	Pebble bool
	// State keeps the plain file log and writes each PUT's state and
	// history to Pebble after it (StateLog): the floor of kvd's design up
	// to data format 6, its Raft log beside Pebble. Not with Pebble.
	State bool
	// Keys is the key set Pebble's state writes spread over. Default
	// DefaultKeys; used only with Pebble or State.
	Keys int
	// Dir holds the nodes' log files. Required.
	Dir string
	// Command returns the command that runs one node process with args
	// (see NodeArgs); kvbench re-executes itself. Required.
	Command func(args []string) *exec.Cmd
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Nodes, 3)
	def(&c.Clients, 64)
	def(&c.ValueSize, 256)
	def(&c.KeySize, 16)
	def(&c.Keys, DefaultKeys)
	if c.Warmup == 0 {
		c.Warmup = DefaultWarmup
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	return c
}

// Validate reports whether c is usable. Zero fields are checked as their
// defaults; c itself is not changed.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Nodes < 1 || c.Nodes > 9:
		return fmt.Errorf("%w: %d nodes (1..9)", ErrConfig, c.Nodes)
	case c.Clients < 1 || c.Clients > 4096:
		return fmt.Errorf("%w: %d clients (1..4096)", ErrConfig, c.Clients)
	case c.ValueSize < 0 || c.KeySize < 0 || c.ValueSize+c.KeySize > MaxRequest:
		return fmt.Errorf("%w: request of %d+%d bytes (at most %d)", ErrConfig, c.KeySize, c.ValueSize, MaxRequest)
	case c.Warmup < 0 || c.Duration <= 0:
		return fmt.Errorf("%w: warmup %v, duration %v", ErrConfig, c.Warmup, c.Duration)
	case c.Keys < 0:
		return fmt.Errorf("%w: %d keys", ErrConfig, c.Keys)
	case c.Pebble && c.State:
		return fmt.Errorf("%w: the log is Pebble or the file, not both (Pebble and State)", ErrConfig)
	case c.Dir == "" || c.Command == nil:
		return fmt.Errorf("%w: Dir and Command are required", ErrConfig)
	}
	return nil
}

// Result is what a floor run measured.
type Result struct {
	Nodes, Clients int
	Synced         bool
	Pebble         bool // the log was Pebble (Config.Pebble)
	State          bool // the state went to Pebble (Config.State)
	// Ops is how many PUTs were acknowledged in the measured part.
	Ops      uint64
	Duration time.Duration
	// ServerCPU is the nodes' processes' CPU time in the measured part,
	// and LeaderCPU the leader's share of it.
	ServerCPU, LeaderCPU time.Duration
	// Batches is how many batches the leader replicated in it.
	Batches uint64
}

// OpsPerSec is the throughput.
func (r Result) OpsPerSec() float64 { return float64(r.Ops) / r.Duration.Seconds() }

// CPUPerOp is the server CPU per PUT, all nodes together.
func (r Result) CPUPerOp() time.Duration {
	if r.Ops == 0 {
		return 0
	}
	return r.ServerCPU / time.Duration(r.Ops)
}

// PerBatch is the mean number of PUTs in a batch.
func (r Result) PerBatch() float64 {
	if r.Batches == 0 {
		return 0
	}
	return float64(r.Ops) / float64(r.Batches)
}

func (r Result) String() string {
	sync := "fdatasync"
	if !r.Synced {
		sync = "no sync"
	}
	switch {
	case r.Pebble:
		sync = "Pebble, " + sync
	case r.State:
		sync = "file log, Pebble state, " + sync
	}
	us := func(d time.Duration) float64 {
		if r.Ops == 0 {
			return 0
		}
		return float64(d.Nanoseconds()) / 1e3 / float64(r.Ops)
	}
	return fmt.Sprintf("floor: %d nodes, %d clients, %s: %.0f PUTs/s, %.1f µs server CPU/PUT (leader %.1f), %.1f PUTs/batch",
		r.Nodes, r.Clients, sync, r.OpsPerSec(), us(r.ServerCPU), us(r.LeaderCPU), r.PerBatch())
}

// Run starts the nodes, drives them and stops them.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	start := func(args []string) (string, error) {
		cmd := cfg.Command(args)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return "", err
		}
		if err := cmd.Start(); err != nil {
			return "", err
		}
		procs = append(procs, cmd)
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("floor: node %v said nothing: %w", args, err)
		}
		return strings.TrimSpace(line), nil
	}
	keys := 0
	if cfg.Pebble || cfg.State {
		keys = cfg.Keys
	}
	var followers []string
	for i := 1; i < cfg.Nodes; i++ {
		addr, err := start(NodeArgs(false, filepath.Join(cfg.Dir, fmt.Sprintf("log%d", i)), nil, !cfg.NoSync, keys, cfg.State))
		if err != nil {
			return Result{}, err
		}
		followers = append(followers, addr)
	}
	leader, err := start(NodeArgs(true, filepath.Join(cfg.Dir, "log0"), followers, !cfg.NoSync, keys, cfg.State))
	if err != nil {
		return Result{}, err
	}
	leaderPid := procs[len(procs)-1].Process.Pid
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.Process.Pid
	}
	return drive(ctx, cfg, leader, func() (all, lead time.Duration, err error) {
		if all, err = procstat.Total(pids); err != nil {
			return 0, 0, err
		}
		lead, err = procstat.CPU(leaderPid)
		return all, lead, err
	})
}

// cpuFunc reads the servers' CPU time so far: all nodes, and the leader.
type cpuFunc func() (all, leader time.Duration, err error)

// drive runs the clients against the leader at addr.
func drive(ctx context.Context, cfg Config, addr string, cpu cpuFunc) (Result, error) {
	var (
		ops    atomic.Uint64
		maxSeq atomic.Uint32
		wg     sync.WaitGroup
		errc   = make(chan error, cfg.Clients)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conns := make([]net.Conn, cfg.Clients)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return Result{}, err
		}
		defer c.Close()
		conns[i] = c
	}
	for i, c := range conns {
		// Each client's bytes are its own letter, so a log shows whose
		// requests a batch carried.
		req := make([]byte, 4+cfg.KeySize+cfg.ValueSize)
		binary.BigEndian.PutUint32(req, uint32(cfg.KeySize+cfg.ValueSize))
		for j := 4; j < len(req); j++ {
			req[j] = byte('a' + i%26)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reply [4]byte
			for ctx.Err() == nil {
				if _, err := c.Write(req); err != nil {
					errc <- err
					return
				}
				if _, err := io.ReadFull(c, reply[:]); err != nil {
					errc <- err
					return
				}
				ops.Add(1)
				for s := binary.BigEndian.Uint32(reply[:]); ; {
					m := maxSeq.Load()
					if s <= m || maxSeq.CompareAndSwap(m, s) {
						break
					}
				}
			}
		}()
	}
	defer func() {
		cancel()
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()
	wait := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case err := <-errc:
			return fmt.Errorf("floor: client: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := wait(cfg.Warmup); err != nil {
		return Result{}, err
	}
	cpu0, lead0, err := cpu()
	if err != nil {
		return Result{}, err
	}
	ops0, seq0, t0 := ops.Load(), maxSeq.Load(), time.Now()
	if err := wait(cfg.Duration); err != nil {
		return Result{}, err
	}
	cpu1, lead1, err := cpu()
	if err != nil {
		return Result{}, err
	}
	return Result{
		Nodes: cfg.Nodes, Clients: cfg.Clients, Synced: !cfg.NoSync, Pebble: cfg.Pebble, State: cfg.State,
		Ops: ops.Load() - ops0, Duration: time.Since(t0),
		ServerCPU: cpu1 - cpu0, LeaderCPU: lead1 - lead0, Batches: uint64(maxSeq.Load() - seq0),
	}, nil
}
