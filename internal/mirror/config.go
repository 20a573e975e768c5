package mirror

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
)

// Config configures a Mirror.
type Config struct {
	// Region is the memory the table lives in (a registered transport
	// region). Required.
	Region []byte
	// Table is the table's shape; its Grace is also the repair loop's
	// period.
	Table table.Config
	// Events receives every applied write, for watches. Nil: none.
	Events Sink
	// Logger receives the mirror's logs. Default slog.Default().
	Logger *slog.Logger
	// Knobs are for tests only.
	Knobs Knobs
}

// Knobs let tests reach into the mirror. The zero value changes nothing.
type Knobs struct {
	// PauseRepair, if set and returning true, makes the repair loop skip
	// its pass.
	PauseRepair func() bool
	// WalkKey, if set, runs before each key of every walk of the durable
	// state (a rebuild's, and its sizing pass); i counts the walk's keys
	// from 0. An error stops the walk with it, as a failed read would.
	WalkKey func(i int) error
	// AtomicStep, if set, runs after each step of an atomic apply
	// (atomic.go), under the table lock: "withheld", then each key.
	AtomicStep func(step string)
	// BeforeApply, if set, is called with every committed batch before
	// the batch reaches the region (on the raft loop, which waits for it):
	// a test that blocks in it holds the batch's writes out of the region.
	BeforeApply func(ws []kv.Write)
}

// Store is the durable state the region mirrors: the node's applied state.
type Store interface {
	// Get reads key's applied value.
	Get(key []byte) (value []byte, m revision.Meta, ok bool, err error)
	// ForEach walks every applied key.
	ForEach(fn func(key, value []byte, m revision.Meta) error) error
	// Leader is the node's current leader (0: none), for the header's
	// hint.
	Leader() uint64
	// Revision is the store revision of the applied state: no later than
	// the state a Get or ForEach called after it reads, so that a rebuild
	// may publish it once it put back what a later ForEach walked.
	Revision() (uint64, error)
}

// Sink receives applied writes as watch events (internal/watch.Hub).
type Sink interface {
	// Publish appends the events of one applied batch; applied is the
	// applied index after it.
	Publish(evs []wire.WatchEvent, applied uint64)
	// Reset drops the history: everything up to index was never
	// reported (a snapshot was installed).
	Reset(index uint64)
}

// Validate reports what is wrong with c; it changes nothing.
func (c Config) Validate() error {
	if len(c.Region) == 0 {
		return errors.New("mirror: Region is required")
	}
	if err := c.Table.Validate(); err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Table.Grace == 0 {
		c.Table.Grace = table.DefaultGrace
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
