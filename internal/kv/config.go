package kv

import (
	"time"

	"github.com/kvd-project/kvd/raft"
)

// Config configures a Store.
type Config struct {
	// Raft configures the node that replicates the state machine; its
	// StateMachine is set by Open.
	Raft raft.Config
	// Publisher, if set, is told every applied write (see Publisher).
	Publisher Publisher
	// LeaseClock is the clock of TTL lease deadlines (lessor.go), read
	// only by the leader. Default time.Now; tests inject one to expire
	// leases deterministically.
	LeaseClock func() time.Time
	// Knobs are for tests.
	Knobs Knobs
}

// Knobs lower limits for tests. Every node of a test must share them, as
// every node of a cluster shares the constants: they are checked when
// entries are applied.
type Knobs struct {
	// MaxLeases replaces MaxLeases (0: MaxLeases).
	MaxLeases int
	// MaxLeaseKeys replaces MaxLeaseKeys (0: MaxLeaseKeys).
	MaxLeaseKeys int
}

func (c Config) withDefaults() Config {
	if c.Publisher == nil {
		c.Publisher = nopPublisher{}
	}
	if c.LeaseClock == nil {
		c.LeaseClock = time.Now
	}
	if c.Knobs.MaxLeases == 0 {
		c.Knobs.MaxLeases = MaxLeases
	}
	if c.Knobs.MaxLeaseKeys == 0 {
		c.Knobs.MaxLeaseKeys = MaxLeaseKeys
	}
	return c
}

// Validate reports the first invalid field (the node's, wrapping
// raft.ErrConfig).
func (c Config) Validate() error { return c.Raft.Validate() }
