package redisbench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
)

// ErrConfig: the Config is unusable.
var ErrConfig = errs.ErrConfig

// Defaults: redis-benchmark's own -c; the value size and -P depths kvd's
// Redis targets are stated at.
const (
	DefaultNodes    = 3
	DefaultClients  = 50
	DefaultRequests = 20000
	DefaultDataSize = 256
	DefaultRounds   = 3
	// DefaultTimeout bounds one redis-benchmark invocation: a stalled
	// target fails its test instead of hanging the series.
	DefaultTimeout = 10 * time.Minute
	// DefaultReadyTimeout bounds waiting for each target to answer a SET.
	DefaultReadyTimeout = 60 * time.Second
	// maxTests bounds -t's list (redis-benchmark has about twenty).
	maxTests = 32
)

// Config describes a series.
type Config struct {
	// Bin is the directory holding the kvd binary. Required with Gateway
	// or Node.
	Bin string
	// Kvbench is the kvbench executable whose resp-floor command serves
	// GoFloor (bench/respfloor). Required with GoFloor.
	Kvbench string
	// RedisServer is the redis-server to compare with. Empty: redis-server
	// from PATH, else a link named redis-server to redis-check-rdb from
	// PATH (Debian's redis-tools: the same binary, which acts as the
	// server when called by that name).
	RedisServer string
	// RedisBenchmark is the load generator. Default "redis-benchmark"
	// from PATH.
	RedisBenchmark string
	// Nodes is the kvd cluster's size. Default 3.
	Nodes int
	// Clients, Requests, DataSize, Keyspace: redis-benchmark's -c, -n, -d
	// and -r (0: no -r, every request on one key, as redis-benchmark
	// does by default).
	Clients, Requests, DataSize, Keyspace int
	// Pipelines are the -P depths. Default 1 and 16.
	Pipelines []int
	// Tests are redis-benchmark -t names, each run on its own so that
	// server CPU is charged per test. Default set, get, incr, mset (get
	// after set, so its key exists).
	Tests []string
	// Rounds: every (target, depth, test) runs once per round, the
	// targets' order rotated by one each round. Default 3.
	Rounds int
	// Targets are the targets to run, a subset of Gateway, Node,
	// GoFloor, Redis, RedisAOF (Targets()). Default all of them.
	Targets []string
	// Timeout bounds one invocation; ReadyTimeout the start of each
	// target. Defaults DefaultTimeout and DefaultReadyTimeout.
	Timeout, ReadyTimeout time.Duration
	// Dir holds the servers' data. Default: a temporary directory that Run
	// removes.
	Dir string
	// Progress, if set, gets a line per invocation.
	Progress io.Writer
}

func (c Config) withDefaults() Config {
	if c.RedisBenchmark == "" {
		c.RedisBenchmark = "redis-benchmark"
	}
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Requests == 0 {
		c.Requests = DefaultRequests
	}
	if c.DataSize == 0 {
		c.DataSize = DefaultDataSize
	}
	if len(c.Pipelines) == 0 {
		c.Pipelines = []int{1, 16}
	}
	if len(c.Tests) == 0 {
		c.Tests = []string{"set", "get", "incr", "mset"}
	}
	if c.Rounds == 0 {
		c.Rounds = DefaultRounds
	}
	if len(c.Targets) == 0 {
		c.Targets = Targets()
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	return c
}

// Validate reports whether c is usable; unset fields are checked as their
// defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.Bin == "" && (containsAny(c.Targets, Gateway, Node)) {
		return fmt.Errorf("%w: no bin directory (kvd)", ErrConfig)
	}
	if c.Kvbench == "" && containsAny(c.Targets, GoFloor) {
		return fmt.Errorf("%w: no kvbench executable (%s)", ErrConfig, GoFloor)
	}
	for _, v := range []struct {
		name   string
		n, max int
	}{{"nodes", c.Nodes, 9}, {"clients", c.Clients, 10000}, {"requests", c.Requests, 1 << 30},
		{"data size", c.DataSize, 1 << 20}, {"rounds", c.Rounds, 1000}} {
		if v.n < 1 || v.n > v.max {
			return fmt.Errorf("%w: %s %d (1..%d)", ErrConfig, v.name, v.n, v.max)
		}
	}
	if c.Keyspace < 0 {
		return fmt.Errorf("%w: keyspace %d", ErrConfig, c.Keyspace)
	}
	for _, p := range c.Pipelines {
		if p < 1 || p > 1024 {
			return fmt.Errorf("%w: pipeline depth %d (1..1024)", ErrConfig, p)
		}
	}
	if len(c.Tests) > maxTests {
		return fmt.Errorf("%w: %d tests (at most %d)", ErrConfig, len(c.Tests), maxTests)
	}
	for _, t := range c.Tests {
		if t == "" || strings.ContainsAny(t, ", \t") {
			return fmt.Errorf("%w: test %q: one redis-benchmark -t name", ErrConfig, t)
		}
	}
	for _, t := range c.Targets {
		if !containsAny(Targets(), t) {
			return fmt.Errorf("%w: target %q (one of %s)", ErrConfig, t, strings.Join(Targets(), ", "))
		}
	}
	return nil
}

func containsAny(list []string, want ...string) bool {
	for _, l := range list {
		for _, w := range want {
			if l == w {
				return true
			}
		}
	}
	return false
}
