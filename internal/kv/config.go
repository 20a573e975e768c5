package kv

import (
	"fmt"
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
	// LeaseClock is the leader's clock: of TTL lease deadlines
	// (lessor.go) and of periodic auto-compaction (compact.go). Default
	// time.Now; tests inject one to expire leases and compact
	// deterministically.
	LeaseClock func() time.Time
	// AutoCompactionMode is etcd's --auto-compaction-mode: CompactPeriodic
	// (keep AutoCompactionRetention of history, a duration or hours) or
	// CompactRevision (keep the last AutoCompactionRetention revisions).
	// Default DefaultAutoCompactionMode.
	AutoCompactionMode string
	// AutoCompactionRetention is etcd's --auto-compaction-retention; "0"
	// turns auto-compaction off. Default DefaultAutoCompactionRetention.
	AutoCompactionRetention string
	// Knobs are for tests.
	Knobs Knobs

	compaction compactPolicy // parsed by withDefaults
}

// Knobs are for tests: lower limits, which every node of a test must
// share, as every node of a cluster shares the constants (they are checked
// when entries are applied), and hooks into a node's own requests.
type Knobs struct {
	// MaxLeases replaces MaxLeases (0: MaxLeases).
	MaxLeases int
	// MaxLeaseKeys replaces MaxLeaseKeys (0: MaxLeaseKeys).
	MaxLeaseKeys int
	// AfterRenew, if set, runs in KeepAlive between the renewal of lease
	// id and the ReadIndex round that confirms it: a test can revoke the
	// lease or cut the leader off there.
	AfterRenew func(id uint64)
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
	if c.AutoCompactionMode == "" {
		c.AutoCompactionMode = DefaultAutoCompactionMode
	}
	if c.AutoCompactionRetention == "" {
		c.AutoCompactionRetention = DefaultAutoCompactionRetention
	}
	c.compaction, _ = parseAutoCompaction(c.AutoCompactionMode, c.AutoCompactionRetention) // Validate checked it
	return c
}

// Validate reports the first invalid field (the node's, wrapping
// raft.ErrConfig).
func (c Config) Validate() error {
	d := c.withDefaults()
	if _, err := parseAutoCompaction(d.AutoCompactionMode, d.AutoCompactionRetention); err != nil {
		return fmt.Errorf("%w: %w", raft.ErrConfig, err)
	}
	return c.Raft.Validate()
}
