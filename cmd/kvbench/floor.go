package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"

	"github.com/kvd-project/kvd/bench/floor"
)

// floorCmd is "kvbench floor": the cheapest replicated PUT on this machine
// (see bench/floor), as a floor under the tcp-64inst PUT point.
func floorCmd(ctx context.Context, args []string) error {
	var cfg floor.Config
	var valueSize string
	fs := flag.NewFlagSet("kvbench floor", flag.ContinueOnError)
	fs.IntVar(&cfg.Nodes, "nodes", 3, "cluster size (one leader)")
	fs.IntVar(&cfg.Clients, "clients", 64, "connections, each with one PUT in flight")
	fs.StringVar(&valueSize, "value-size", "256", "value size")
	fs.IntVar(&cfg.KeySize, "key-size", 16, "key size")
	fs.DurationVar(&cfg.Warmup, "warmup", floorDefaults.Warmup, "unmeasured time first")
	fs.DurationVar(&cfg.Duration, "duration", floorDefaults.Duration, "measured time")
	fs.BoolVar(&cfg.NoSync, "no-sync", false, "skip the fdatasyncs (what the disk costs)")
	fs.BoolVar(&cfg.Pebble, "pebble", false, "log to Pebble as kvd's store does: each PUT a log entry and a state write, one synced Pebble batch per batch")
	fs.BoolVar(&cfg.State, "state", false, "log to the plain file as the floor does, then write each PUT's state and history to Pebble, unsynced and without Pebble's own log, as kvd does with --raft-log wal")
	fs.IntVar(&cfg.Keys, "keys", floor.DefaultKeys, "with --pebble or --state: the key set the state writes spread over")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	vs, err := size(valueSize)
	if err != nil {
		return usageError{"--value-size: " + err.Error()}
	}
	cfg.ValueSize = vs
	res, err := runFloor(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Println(res)
	return nil
}

// runFloor runs cfg in a temporary directory, its nodes this executable's
// floor-node command.
func runFloor(ctx context.Context, cfg floor.Config) (floor.Result, error) {
	dir, err := os.MkdirTemp("", "kvbench-floor-")
	if err != nil {
		return floor.Result{}, err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return floor.Result{}, err
	}
	cfg.Dir, cfg.Command = dir, floorNodes(self)
	if err := cfg.Validate(); err != nil {
		return floor.Result{}, usageError{err.Error()}
	}
	return floor.Run(ctx, cfg)
}

// floorNodes runs floor nodes as kvbench's floor-node command.
func floorNodes(kvbench string) func(args []string) *exec.Cmd {
	return func(args []string) *exec.Cmd {
		cmd := exec.Command(kvbench, append([]string{"floor-node"}, args...)...)
		cmd.Stderr = os.Stderr
		return cmd
	}
}

var floorDefaults = floor.Config{Warmup: floor.DefaultWarmup, Duration: floor.DefaultDuration}

// floorNodeCmd is one node process of "kvbench floor" (not for users).
func floorNodeCmd(ctx context.Context, args []string) error {
	err := floor.RunNode(ctx, args, os.Stdout)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
