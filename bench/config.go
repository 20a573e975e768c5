package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/bench/workload"
	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/errs"
)

// Sentinel errors.
var (
	// ErrConfig: a Config or Point is unusable.
	ErrConfig = errs.ErrConfig
	// ErrPreload: the key space could not be written before a run.
	ErrPreload = errors.New("bench: preload failed")
)

// Store is what the harness drives; Client makes a *client.Client one. Every
// method must be safe for concurrent use: many workers share one Store.
type Store interface {
	Get(ctx context.Context, key []byte, opts ...client.ReadOption) ([]byte, error)
	Put(ctx context.Context, key, value []byte) error
	// GetModRevision and CompareAndSwap serve the CAS workload: a read of the
	// key's version, then a write applied only if the key is still at that
	// version (0: absent), failing with client.ErrConflict otherwise.
	GetModRevision(ctx context.Context, key []byte, opts ...client.ReadOption) ([]byte, uint64, error)
	CompareAndSwap(ctx context.Context, key, value []byte, version uint64) error
	// Scan serves the scan workload (YCSB-E): up to limit keys with their
	// values, in key order, from start on; it returns how many it read.
	Scan(ctx context.Context, start []byte, limit int, opts ...client.ReadOption) (int, error)
	Stats() client.Stats
}

// Client is a *client.Client as a Store.
type Client struct{ *client.Client }

// CompareAndSwap is PutVersion with client.IfModRevision(version).
func (c Client) CompareAndSwap(ctx context.Context, key, value []byte, version uint64) error {
	_, err := c.PutRevision(ctx, key, value, client.IfModRevision(version))
	return err
}

// Scan is Range from start with no upper bound and client.WithLimit(limit):
// one page, one request. It asks for no count of the rest of the key
// space (client.WithoutCount), which would walk it all.
func (c Client) Scan(ctx context.Context, start []byte, limit int, opts ...client.ReadOption) (int, error) {
	r, err := c.Range(ctx, start, nil, append(opts, client.WithLimit(limit), client.WithoutCount())...)
	if err != nil {
		return 0, err
	}
	return len(r.KVs), nil
}

// Mode is how operations are issued.
type Mode uint8

const (
	// Closed: Clients workers each issue the next operation as soon as the
	// last one returns. Throughput is what the system gives at that
	// concurrency.
	Closed Mode = iota
	// Open: operations are due at a fixed Rate whether or not earlier ones
	// have returned, served by up to Clients workers; a late operation's
	// latency counts from when it was due (coordinated omission corrected).
	Open
)

func (m Mode) String() string {
	if m == Open {
		return "open"
	}
	return "closed"
}

// ParseMode maps a flag value onto a Mode.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "closed", "":
		return Closed, nil
	case "open":
		return Open, nil
	}
	return 0, fmt.Errorf("%w: mode %q (want closed or open)", ErrConfig, s)
}

// Config configures a Runner.
type Config struct {
	// Stores are the client instances workers share, round robin.
	// Required.
	Stores []Store
	// Transport is the transport's name, for the results ("tcp", "rdma").
	// Required.
	Transport string
	// Series labels the results; runs of one series form one line in
	// plots. Default: Transport.
	Series string
	// ServerPIDs are the server processes whose CPU time is charged to the
	// runs. Empty: server CPU is not measured.
	ServerPIDs []int
	// IdleServerCPU is the servers' CPU use without load, in cores, as
	// IdleCPU measured it; runs report their CPU per op net of it.
	IdleServerCPU float64
	// Seed makes the key and operation sequences reproducible. Default 1.
	Seed uint64
	// PreloadWorkers is the concurrency of Preload. Default 32.
	PreloadWorkers int
	// Settle is a pause after a Preload that wrote keys, so the servers'
	// background work (log flushes, snapshots) lands less in the next
	// point's CPU time. Default 0.
	Settle time.Duration
	// Progress, if set, is called about every ProgressEvery during a run,
	// from one goroutine.
	Progress func(Progress)
	// Profile, if set, is called as each run's measured part begins, with
	// the point and the part's length (kvbench --cpuprofile starts a CPU
	// profile of every server for that long); the function it returns is
	// called when the part has ended and the servers' CPU time was read,
	// and its error fails the run. A profiler's own work is charged to the
	// servers' CPU time.
	Profile func(p *Point, d time.Duration) (done func() error)
	// ProgressEvery defaults to 1s.
	ProgressEvery time.Duration
}

// Defaults.
const (
	DefaultSeed           = 1
	DefaultPreloadWorkers = 32
	DefaultProgressEvery  = time.Second
	// MaxClients bounds a point's workers.
	MaxClients = 4096
)

// withDefaults returns c with its unset fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Series == "" {
		c.Series = c.Transport
	}
	if c.Seed == 0 {
		c.Seed = DefaultSeed
	}
	if c.PreloadWorkers <= 0 {
		c.PreloadWorkers = DefaultPreloadWorkers
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = DefaultProgressEvery
	}
	return c
}

// Validate reports whether c is usable; c itself is not changed.
func (c Config) Validate() error {
	if len(c.Stores) == 0 {
		return fmt.Errorf("%w: no stores", ErrConfig)
	}
	for i, s := range c.Stores {
		if s == nil {
			return fmt.Errorf("%w: store %d is nil", ErrConfig, i)
		}
	}
	if c.Transport == "" {
		return fmt.Errorf("%w: transport name required", ErrConfig)
	}
	return nil
}

// Point is one measurement.
type Point struct {
	Workload    workload.Config
	Consistency client.Consistency
	Mode        Mode
	// Clients is the number of workers: the concurrency of a closed loop,
	// the most operations in flight in an open loop. Default 1.
	Clients int
	// Rate is the open loop's target, in operations per second.
	Rate float64
	// Duration is how long the measured part lasts. Default 2s.
	Duration time.Duration
	// Warmup runs the workload unmeasured first. Default 0.
	Warmup time.Duration
	// Note is copied into the result.
	Note string
}

// DefaultDuration is a Point's measured time when none is given.
const DefaultDuration = 2 * time.Second

// withDefaults returns p with its zero fields set to their defaults.
func (p Point) withDefaults() Point {
	p.Workload = p.Workload.WithDefaults()
	if p.Clients == 0 {
		p.Clients = 1
	}
	if p.Duration == 0 {
		p.Duration = DefaultDuration
	}
	return p
}

// Validate reports whether p is usable. Zero fields are checked as their
// defaults; p itself is not changed.
func (p Point) Validate() error {
	p = p.withDefaults()
	if err := p.Workload.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch {
	case p.Clients < 0 || p.Clients > MaxClients:
		return fmt.Errorf("%w: %d clients (1..%d)", ErrConfig, p.Clients, MaxClients)
	case p.Duration < 0 || p.Warmup < 0:
		return fmt.Errorf("%w: negative duration", ErrConfig)
	case p.Mode == Open && !(p.Rate > 0):
		return fmt.Errorf("%w: open loop needs a rate > 0", ErrConfig)
	case p.Mode > Open:
		return fmt.Errorf("%w: unknown mode %d", ErrConfig, p.Mode)
	case p.Workload.KeySize > client.MaxKey:
		return fmt.Errorf("%w: key size %d above the client's %d", ErrConfig, p.Workload.KeySize, client.MaxKey)
	case p.Workload.ValueSize > client.MaxValue:
		return fmt.Errorf("%w: value size %d above the client's %d", ErrConfig, p.Workload.ValueSize, client.MaxValue)
	}
	return nil
}

// String is a short label for progress lines.
func (p *Point) String() string {
	s := fmt.Sprintf("%v %v c=%d v=%dB %v", p.Workload.Mix, p.Consistency, p.Clients, p.Workload.ValueSize, p.Workload.Dist)
	if p.Mode == Open {
		s += fmt.Sprintf(" open@%.0f/s", p.Rate)
	}
	return s
}

// Progress is a running point's state.
type Progress struct {
	Point   *Point
	Elapsed time.Duration // since the measured part began (negative in warmup)
	Ops     uint64        // operations completed so far, warmup included
	Errors  uint64
	Rate    float64 // ops/s over the last interval
}
