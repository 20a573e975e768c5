package writepath

import (
	"context"
	"fmt"
	"io"

	"github.com/kvd-project/kvd/internal/errs"
)

// ErrConfig: the Config is unusable.
var ErrConfig = errs.ErrConfig

// Role is what a point is to the others in the report's ratios.
type Role string

const (
	// Floor is the point every CPU figure is divided by. A run has one.
	Floor Role = "floor"
	// Reference is another floor (the Pebble and state floors): shown with its CPU
	// over the floor's.
	Reference Role = "reference"
	// Candidate is a kvd under test: its CPU over the floor's, its
	// throughput and one-client latency over the baseline's.
	Candidate Role = "candidate"
	// Baseline is the build candidates are compared with (the previous
	// commit's). A run has at most one.
	Baseline Role = "baseline"
)

// Measurement is what one point measured in one round.
type Measurement struct {
	// CPUPerPut is the server processes' CPU time per PUT, every node
	// together, in µs, in the 64-instance shape.
	CPUPerPut float64 `json:"cpu_us_per_put"`
	// PutsPerSec is the throughput of the same.
	PutsPerSec float64 `json:"puts_per_sec"`
	// P50 is the median latency of one client's PUTs in µs; 0 where the
	// point does not measure it (the floors).
	P50 float64 `json:"one_client_p50_us,omitempty"`
}

// Point is one thing measured every round.
type Point struct {
	Name string
	Role Role
	// Detail says what the point runs, for the report ("bin/kvd
	// --raft-log wal").
	Detail string
	// Measure measures the point once, from start to finish (a cluster
	// of its own each time).
	Measure func(context.Context) (Measurement, error)
}

// Defaults and limits.
const (
	DefaultRounds = 3
	// MaxRounds bounds Rounds: each round of the default points takes
	// minutes.
	MaxRounds = 100
)

// Config describes a run.
type Config struct {
	// Points in the first round's order. One Floor, at most one Baseline,
	// names unique. Required.
	Points []Point
	// Rounds of every point; round r (from 0) starts at point r modulo
	// their number. Default 3.
	Rounds int
	// Meta describes the shape for the report; Run fills in the times,
	// the rounds and the machine's load.
	Meta Meta
	// Progress, if set, gets a line per measured point.
	Progress io.Writer
}

func (c Config) withDefaults() Config {
	if c.Rounds == 0 {
		c.Rounds = DefaultRounds
	}
	return c
}

// Validate reports whether c is usable; unset fields are checked as their
// defaults, and c is not changed.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.Rounds < 1 || c.Rounds > MaxRounds {
		return fmt.Errorf("%w: %d rounds (1..%d)", ErrConfig, c.Rounds, MaxRounds)
	}
	seen := map[string]bool{}
	roles := map[Role]int{}
	for _, p := range c.Points {
		switch {
		case p.Name == "":
			return fmt.Errorf("%w: a point without a name", ErrConfig)
		case seen[p.Name]:
			return fmt.Errorf("%w: point %q twice", ErrConfig, p.Name)
		case p.Measure == nil:
			return fmt.Errorf("%w: point %q has no Measure", ErrConfig, p.Name)
		}
		switch p.Role {
		case Floor, Reference, Candidate, Baseline:
		default:
			return fmt.Errorf("%w: point %q has role %q", ErrConfig, p.Name, p.Role)
		}
		seen[p.Name] = true
		roles[p.Role]++
	}
	if roles[Floor] != 1 {
		return fmt.Errorf("%w: %d floor points, want one (every CPU ratio is over it)", ErrConfig, roles[Floor])
	}
	if roles[Baseline] > 1 {
		return fmt.Errorf("%w: %d baseline points, want at most one", ErrConfig, roles[Baseline])
	}
	return nil
}
