package mirror

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
)

// Mirror is one node's table region, kept equal to the node's applied
// state. Its raft-facing methods (Apply, Restore, BatchAhead, Events,
// OnLease) run on the raft loop; the rest are safe for concurrent use.
type Mirror struct {
	cfg   Config
	log   *slog.Logger
	store Store // set by Start
	// events is Events' scratch (raft loop only).
	events []wire.WatchEvent

	// tmu serialises every write to the table (applies, rebuilds,
	// repairs) and the RPC reads that must see it at a batch boundary.
	tmu           sync.Mutex
	tbl           *table.Table
	missing       map[string]uint64 // applied keys the region could not hold: their records' lengths
	missingBytes  uint64            // the sum of missing's lengths (reserveLocked counts them)
	rebuildFailed bool              // the region is partial until a rebuild succeeds
	// Repair passes that placed nothing and compacted nothing, in a row;
	// how many of them bring a repack; the table's Compacted count at the
	// last pass (repair.go).
	stalls, repackAfter int
	compactedSeen       uint64
	// ahead is open while the store holds a batch that the region has not
	// applied yet (BatchAhead, atomic.go).
	ahead chan struct{}

	// leaseMu guards the lease word and nothing slow: the lease is
	// published without waiting for tmu. rebuilding is written holding
	// both locks, so either one suffices to read it.
	leaseMu     sync.Mutex
	leaseExpiry time.Time
	rebuilding  bool
	leaseValid  bool // the word last published was non-zero
	// retired: the region was withdrawn (Retire) and is written no more;
	// written holding both locks, like rebuilding.
	retired bool

	counts counters

	// stop ends the repair loop and cuts a rebuild's waits short (Close).
	stop      chan struct{}
	closeOnce sync.Once
	loop      sync.WaitGroup
}

// counters are the mirror's event counts (Counts).
type counters struct {
	refusals, applyMisses, repacks atomic.Uint64
}

// Counts are what the mirror has counted since it was made.
type Counts struct {
	// Refusals counts writes refused at admission (Reserve) for lack of
	// room.
	Refusals uint64
	// ApplyMisses counts applied writes the region could not hold.
	ApplyMisses uint64
	// Repacks counts rebuilds the repair loop ran because free space was
	// too cut up to place missing keys.
	Repacks uint64
}

// New formats the table in cfg.Region. The mirror serves nothing until
// Start.
func New(cfg Config) (*Mirror, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tbl, err := table.Format(cfg.Region, cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("format table: %w", err)
	}
	return &Mirror{
		cfg: cfg, log: cfg.Logger, tbl: tbl,
		missing:     map[string]uint64{},
		repackAfter: repackPasses,
		stop:        make(chan struct{}),
	}, nil
}

// Start opens the store that feeds the mirror (open: the raft node, which
// calls the mirror's raft-facing methods from then on), fills the region
// from it, and starts the repair loop. The table is held from before open
// until the region is filled: applies the store delivers meanwhile wait,
// then land on the filled table, and the lease word stays clear. keys is
// how many keys the region holds then, missing how many it could not
// place. Errors from open are returned as they are.
func (m *Mirror) Start(open func() (Store, error)) (keys, missing int, err error) {
	m.tmu.Lock()
	m.setRebuilding(true)
	if m.store, err = open(); err != nil {
		m.tmu.Unlock()
		return 0, 0, err
	}
	err = m.rebuildLocked()
	missing, keys = len(m.missing), m.tbl.Len() // the raft loop applies as soon as the lock is free
	m.tmu.Unlock()
	if err != nil {
		return keys, missing, fmt.Errorf("rebuild table from stored state: %w", err)
	}
	m.loop.Add(1)
	go m.repairLoop()
	return keys, missing, nil
}

// Close stops the repair loop and cuts short a rebuild's waits, and waits
// for the loop to end. Applies may still come (and are mirrored) until the
// store stops; the region's memory must outlive them.
func (m *Mirror) Close() {
	m.closeOnce.Do(func() { close(m.stop) })
	m.loop.Wait()
}

// Hold takes the table lock, as a long repair pass or a rebuild would,
// and returns its release (which may be called from another goroutine).
// Nothing writes the region meanwhile: applies wait.
func (m *Mirror) Hold() (release func()) {
	m.tmu.Lock()
	return m.tmu.Unlock
}

// Header is the table's header as the mirror last wrote it.
func (m *Mirror) Header() table.Header {
	m.tmu.Lock()
	defer m.tmu.Unlock()
	return m.tbl.Header()
}

// Stats is the table's space and keys.
func (m *Mirror) Stats() table.Stats {
	m.tmu.Lock()
	defer m.tmu.Unlock()
	return m.tbl.Stats()
}

// CompleteIn is how long until the table lets the incomplete flag clear
// (table.CompleteIn); the repair loop clears it within a grace period
// after that, if nothing is missing.
func (m *Mirror) CompleteIn() time.Duration {
	m.tmu.Lock()
	defer m.tmu.Unlock()
	return m.tbl.CompleteIn()
}

// Counts reports the mirror's counters.
func (m *Mirror) Counts() Counts {
	return Counts{Refusals: m.counts.refusals.Load(), ApplyMisses: m.counts.applyMisses.Load(),
		Repacks: m.counts.repacks.Load()}
}

// Evict drops key from the region as an applied write the region could
// not hold does (applyLocked): the region flagged incomplete, the key left
// to the repair loop. For tests and tools.
func (m *Mirror) Evict(key []byte) error {
	value, _, _, err := m.store.Get(key)
	if err != nil {
		return err
	}
	m.tmu.Lock()
	defer m.tmu.Unlock()
	m.tbl.Evict(key)
	m.noteMissing(key, len(value))
	return nil
}
