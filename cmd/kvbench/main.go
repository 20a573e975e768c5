package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `usage: kvbench <command> [flags]

commands:
  run           measure workloads against a cluster (started with --start-cluster,
                or given with --endpoints); the default when the first argument is a flag
  baseline-tcp  raw TCP request/response round trips over loopback
  perftest      parse perftest output files, or run ib_read_lat/ib_send_lat on a device
  report        merge result JSON files (or console logs) into markdown, CSV and plots
  etcd          etcd's benchmark tool against a 3-member etcd, kvd's nodes and a kvd
                gateway, in one run: bench/results/etcd.md (scripts/etcd-benchmark.sh builds it)
  floor         the cheapest replicated PUT on this machine: 3 bare processes that
                only batch, replicate, fdatasync and reply (a floor under kvd's PUT CPU)
  writepath     the floors (plain, Pebble, state) and kvd per Raft log (and a baseline build)
                alternated in rounds in one window: server CPU per PUT over the floor's,
                PUTs/s and one-client p50 over the baseline's (bench/writepath)
  redis         redis-benchmark against kvd's gateway, a kvd node, a minimal Go RESP
                server (go-floor), and redis-server without persistence and with
                appendfsync always (bench/redisbench)
  resp-floor    the go-floor target alone: a minimal Go RESP server answering GET, SET,
                INCR, MSET and PING from memory (bench/respfloor)

'kvbench <command> -h' lists a command's flags.
`

// exitUsage is the exit status for bad invocations; 1 is for failed runs.
const exitUsage = 2

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := dispatch(ctx, os.Args[1:])
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(exitUsage)
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, "kvbench:", err)
		os.Exit(exitUsage)
	default:
		fmt.Fprintln(os.Stderr, "kvbench:", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" {
		return runCmd(ctx, args)
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:])
	case "baseline-tcp":
		return baselineTCPCmd(ctx, args[1:])
	case "perftest":
		return perftestCmd(ctx, args[1:])
	case "report":
		return reportCmd(args[1:])
	case "floor":
		return floorCmd(ctx, args[1:])
	case "redis":
		return redisCmd(ctx, args[1:])
	case "etcd":
		return etcdCmd(ctx, args[1:])
	case "writepath":
		return writepathCmd(ctx, args[1:])
	case "resp-floor":
		return respFloorCmd(ctx, args[1:])
	case "floor-node":
		return floorNodeCmd(ctx, args[1:])
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q\n%s", args[0], usage)}
}
