package writepath

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/kvd-project/kvd/bench/procstat"
)

// ErrIncomplete: a point failed in some round, so the report lacks a
// side of some ratio.
var ErrIncomplete = errors.New("writepath: incomplete run")

// Order is the points' order in round r (from 0): the list rotated left by
// r, so each point starts a round in turn.
func Order[T any](points []T, round int) []T {
	n := len(points)
	out := make([]T, 0, n)
	for i := range n {
		out = append(out, points[(i+round)%n])
	}
	return out
}

// Run measures every point in every round. A point that fails is recorded
// in the report's Errors and the run goes on (what the others measured is
// still worth reading); the error then wraps ErrIncomplete. If ctx ends,
// Run returns at once with what it has.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Meta: cfg.Meta}
	rep.Meta.Rounds, rep.Meta.CPUs = cfg.Rounds, runtime.NumCPU()
	rep.Meta.Started, rep.Meta.LoadBefore = time.Now().UTC(), procstat.LoadAvg()
	for _, p := range cfg.Points {
		rep.Points = append(rep.Points, PointInfo{Name: p.Name, Role: p.Role, Detail: p.Detail})
	}
	defer func() { rep.Meta.Finished, rep.Meta.LoadAfter = time.Now().UTC(), procstat.LoadAvg() }()
	for r := range cfg.Rounds {
		for i, p := range Order(cfg.Points, r) {
			m, err := p.Measure(ctx)
			if err == nil {
				err = m.check(p.Role)
			}
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("round %d, %s: %v", r+1, p.Name, err))
				progress(cfg, "round %d/%d %s: FAILED: %v", r+1, cfg.Rounds, p.Name, err)
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
				continue
			}
			rep.Samples = append(rep.Samples, Sample{Point: p.Name, Round: r + 1, Order: i + 1, Measurement: m})
			p50 := ""
			if m.P50 > 0 {
				p50 = fmt.Sprintf(", one-client PUT p50 %.0f µs", m.P50)
			}
			progress(cfg, "round %d/%d %s: %.1f µs server CPU/PUT, %.0f PUTs/s%s", r+1, cfg.Rounds, p.Name, m.CPUPerPut, m.PutsPerSec, p50)
		}
	}
	if len(rep.Errors) > 0 {
		return rep, fmt.Errorf("%w: %d points failed, the first: %s", ErrIncomplete, len(rep.Errors), rep.Errors[0])
	}
	return rep, nil
}

// check refuses a measurement with a missing figure: a zero would make a
// ratio look like a result.
func (m Measurement) check(role Role) error {
	switch {
	case !(m.CPUPerPut > 0):
		return fmt.Errorf("no server CPU per PUT (%v)", m.CPUPerPut)
	case !(m.PutsPerSec > 0):
		return fmt.Errorf("no PUTs per second (%v)", m.PutsPerSec)
	case (role == Candidate || role == Baseline) && !(m.P50 > 0):
		return fmt.Errorf("no one-client PUT p50 (%v)", m.P50)
	}
	return nil
}

func progress(cfg Config, format string, args ...any) {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "writepath: "+format+"\n", args...)
	}
}
