package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kvd-project/kvd/bench/floor"
	"github.com/kvd-project/kvd/bench/result"
	"github.com/kvd-project/kvd/bench/writepath"
)

// writepathOptions are "kvbench writepath"'s flags.
type writepathOptions struct {
	rounds, clients, keys, valueSize int
	duration, warmup                 time.Duration
	bin, raftLogs                    string
	baselineBin, baselineRaftLog     string
	out                              string
	quiet                            bool
}

// writepathCmd is "kvbench writepath": the floor, the Pebble floor and a
// kvd cluster per Raft log (and a baseline build), alternated in rounds in
// one window (see bench/writepath). It prints the report and, if every
// point of every round was measured, writes it into --out.
func writepathCmd(ctx context.Context, args []string) error {
	o, err := parseWritepath(args)
	if err != nil {
		return err
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	if !o.quiet {
		cfg.Progress = os.Stderr
	}
	rep, runErr := writepath.Run(ctx, cfg)
	if rep == nil {
		return runErr
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr != nil {
		if o.out != "" {
			fmt.Fprintf(os.Stderr, "kvbench: %s left as it was: the run is incomplete\n", o.out)
		}
		return runErr
	}
	if o.out == "" {
		return nil
	}
	return rep.Save(o.out)
}

func parseWritepath(args []string) (*writepathOptions, error) {
	o := &writepathOptions{}
	var valueSize string
	fs := flag.NewFlagSet("kvbench writepath", flag.ContinueOnError)
	fs.IntVar(&o.rounds, "rounds", writepath.DefaultRounds, "rounds of every point, the order rotated each round (the report takes medians)")
	fs.DurationVar(&o.duration, "duration", floor.DefaultDuration, "measured time of each point (on kvd's clusters: of the many-client part, and again of the one-client part)")
	fs.DurationVar(&o.warmup, "warmup", floor.DefaultWarmup, "unmeasured time before each measured part")
	fs.IntVar(&o.clients, "clients", 64, "connections (client instances), each with one PUT in flight")
	fs.IntVar(&o.keys, "keys", floor.DefaultKeys, "keys the PUTs spread over (kvd's are preloaded)")
	fs.StringVar(&valueSize, "value-size", "256", "value size")
	fs.StringVar(&o.bin, "bin", "bin", "directory holding the kvd binary under test")
	fs.StringVar(&o.raftLogs, "raft-logs", "pebble,wal", "kvd --raft-log values to measure, a point each (kvd-<value>)")
	fs.StringVar(&o.baselineBin, "baseline-bin", "", "directory holding a baseline kvd, the previous commit's build: point 'baseline', which kvd's PUTs/s and p50 are divided by (empty: none)")
	fs.StringVar(&o.baselineRaftLog, "baseline-raft-log", "", "--raft-log of the baseline's nodes (empty: the flag is not passed, so its default; an older build may lack it)")
	fs.StringVar(&o.out, "out", "", "directory for writepath.md and writepath.json, written only if every point of every round was measured (empty: none)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	vs, err := size(valueSize)
	if err != nil {
		return nil, usageError{"--value-size: " + err.Error()}
	}
	o.valueSize = vs
	// The kvd points measure at --clients and at one client on one
	// cluster: the two must differ.
	if o.clients < 2 {
		return nil, usageError{fmt.Sprintf("--clients %d: want at least 2", o.clients)}
	}
	// Zero would mean each tool's own default, which the report would
	// not show.
	if o.duration <= 0 || o.warmup < 0 {
		return nil, usageError{fmt.Sprintf("--duration %v, --warmup %v: want a positive duration and no negative warm-up", o.duration, o.warmup)}
	}
	return o, nil
}

// config turns the options into the run's points: the floor, the Pebble
// floor, the state floor, kvd per Raft log, and the baseline. Every point's settings are
// checked here, before anything starts.
func (o *writepathOptions) config() (writepath.Config, error) {
	fc := floor.Config{Clients: o.clients, ValueSize: o.valueSize, Keys: o.keys, Warmup: o.warmup, Duration: o.duration}
	pfc, sfc := fc, fc
	pfc.Pebble, sfc.State = true, true
	for _, c := range []floor.Config{fc, pfc, sfc} {
		// runFloor gives each run its directory and command.
		c.Dir, c.Command = os.TempDir(), floorNodes("kvbench")
		if err := c.Validate(); err != nil {
			return writepath.Config{}, usageError{err.Error()}
		}
	}
	points := []writepath.Point{
		{Name: "floor", Role: writepath.Floor, Detail: fmt.Sprintf("kvbench floor --clients %d", o.clients), Measure: floorPoint(fc)},
		{Name: "floor-pebble", Role: writepath.Reference, Detail: fmt.Sprintf("kvbench floor --pebble --clients %d --keys %d", o.clients, o.keys),
			Measure: floorPoint(pfc)},
		{Name: "floor-state", Role: writepath.Reference, Detail: fmt.Sprintf("kvbench floor --state --clients %d --keys %d", o.clients, o.keys),
			Measure: floorPoint(sfc)},
	}
	kvd := func(name string, role writepath.Role, bin, raftLog string) error {
		m, err := o.kvdPoint(bin, raftLog)
		if err != nil {
			return err
		}
		detail := filepath.Join(bin, "kvd") + " (its default Raft log)"
		if raftLog != "" {
			detail = fmt.Sprintf("%s --raft-log %s", filepath.Join(bin, "kvd"), raftLog)
		}
		points = append(points, writepath.Point{Name: name, Role: role, Detail: detail, Measure: m})
		return nil
	}
	for _, mode := range splitList(o.raftLogs) {
		if err := kvd("kvd-"+mode, writepath.Candidate, o.bin, mode); err != nil {
			return writepath.Config{}, err
		}
	}
	if o.baselineBin != "" {
		if err := kvd("baseline", writepath.Baseline, o.baselineBin, o.baselineRaftLog); err != nil {
			return writepath.Config{}, err
		}
	}
	cfg := writepath.Config{Points: points, Rounds: o.rounds, Meta: writepath.Meta{Clients: o.clients, Keys: o.keys,
		ValueSize: o.valueSize, Seconds: o.duration.Seconds(), WarmupSeconds: o.warmup.Seconds()}}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err.Error()}
	}
	return cfg, nil
}

// floorPoint measures one floor run.
func floorPoint(cfg floor.Config) func(context.Context) (writepath.Measurement, error) {
	return func(ctx context.Context) (writepath.Measurement, error) {
		res, err := runFloor(ctx, cfg)
		if err != nil {
			return writepath.Measurement{}, err
		}
		return writepath.Measurement{CPUPerPut: float64(res.CPUPerOp().Nanoseconds()) / 1e3, PutsPerSec: res.OpsPerSec()}, nil
	}
}

// kvdPoint measures a 3-node cluster of bin's kvd (with --raft-log
// raftLog unless empty), as "kvbench run" does: the key space preloaded,
// then PUTs from --clients client instances, then from one. Its settings
// are checked now.
func (o *writepathOptions) kvdPoint(bin, raftLog string) (func(context.Context) (writepath.Measurement, error), error) {
	if _, err := os.Stat(filepath.Join(bin, "kvd")); err != nil {
		return nil, usageError{fmt.Sprintf("no kvd binary: %v", err)}
	}
	args := []string{"--start-cluster", "3", "--bin", bin, "--keys", strconv.Itoa(o.keys), "--value-size", strconv.Itoa(o.valueSize),
		"--conns", strconv.Itoa(o.clients), "--clients", fmt.Sprintf("%d,1", o.clients), "--mix", "put",
		"--duration", o.duration.String(), "--warmup", o.warmup.String(), "--idle", "0", "--baseline=false", "--quiet", "-w", "none"}
	options := func() (*runOptions, error) {
		ro := &runOptions{tableMem: 256 << 20}
		fs := runFlags(ro)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(args); err != nil {
			return nil, usageError{err.Error()}
		}
		if raftLog != "" {
			ro.kvdExtra = []string{"--raft-log", raftLog}
		}
		_, err := ro.buildSweep()
		return ro, err
	}
	if _, err := options(); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (writepath.Measurement, error) {
		ro, err := options()
		if err != nil {
			return writepath.Measurement{}, err
		}
		rep, err := ro.run(ctx)
		if err != nil {
			return writepath.Measurement{}, err
		}
		return kvdMeasurement(rep, o.clients)
	}, nil
}

// kvdMeasurement takes a kvd point's figures from its two runs.
func kvdMeasurement(rep *result.Report, clients int) (writepath.Measurement, error) {
	var m writepath.Measurement
	var many, one bool
	for _, r := range rep.Runs {
		switch r.Clients {
		case clients:
			m.CPUPerPut, m.PutsPerSec, many = r.ServerCPUPerOp, r.Throughput, true
		case 1:
			m.P50, one = r.PutLat.P50, true
		}
	}
	if !many || !one {
		return m, fmt.Errorf("kvd measured %d runs, not one at %d clients and one at 1", len(rep.Runs), clients)
	}
	return m, nil
}
