package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kvd-project/kvd/bench/baseline"
	"github.com/kvd-project/kvd/bench/result"
)

func tcpBaseline(ctx context.Context, sizes []int, small, iters int, series string) ([]result.Baseline, error) {
	return baseline.TCP(ctx, baseline.TCPConfig{Sizes: sizes, SmallSize: small, Iters: iters, Series: series})
}

// baselineTCPCmd is "kvbench baseline-tcp": the ping-pong alone.
func baselineTCPCmd(ctx context.Context, args []string) error {
	var sizes, write, jsonOut, series string
	var iters, small int
	fs := flag.NewFlagSet("kvbench baseline-tcp", flag.ContinueOnError)
	fs.StringVar(&sizes, "sizes", "16,256,4KiB,64KiB", "payload sizes")
	fs.IntVar(&small, "small", 16, "size of the other direction (a key, a short reply)")
	fs.IntVar(&iters, "iters", 20000, "round trips per size and shape")
	fs.StringVar(&series, "series", "tcp", "label of the results")
	fs.StringVar(&write, "w", "table", "stdout: table, json, marked or none")
	fs.StringVar(&jsonOut, "json", "", "also write the JSON report to this file")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if err := checkWrite(write); err != nil {
		return err
	}
	sz, err := listOf("sizes", sizes, size)
	if err != nil {
		return err
	}
	bases, err := tcpBaseline(ctx, sz, small, iters, series)
	if err != nil {
		return err
	}
	rep := &result.Report{Schema: result.SchemaVersion, Meta: []result.Meta{newMeta(series, "none (raw loopback TCP)", os.Args[1:])}, Baselines: bases}
	return emitBaselines(rep, write, jsonOut)
}

func emitBaselines(rep *result.Report, write, jsonOut string) error {
	if jsonOut != "" {
		if err := writeFile(jsonOut, func(w io.Writer) error { return result.WriteJSON(w, rep) }); err != nil {
			return err
		}
	}
	return writeStdout(os.Stdout, write, rep)
}

// rdmaOptions say where RDMA baselines come from: perftest output files,
// or runs of perftest on a device.
type rdmaOptions struct {
	device, addr, args, files string
}

func (o *rdmaOptions) flags(fs *flag.FlagSet) {
	addr := os.Getenv("RDMAVM_ADDR")
	if addr == "" {
		addr = "127.1.0.1"
	}
	fs.StringVar(&o.device, "rdma-device", "", "run ib_read_lat and ib_send_lat on this RDMA device (e.g. rxe0) for the RDMA baseline")
	fs.StringVar(&o.addr, "rdma-addr", addr, "address perftest's client connects to (the device's IP)")
	fs.StringVar(&o.args, "perftest-args", "-n 1000", "arguments for both perftest server and client, besides -d and -s")
	fs.StringVar(&o.files, "perftest", "", "perftest output files (ib_read_lat/ib_send_lat reports, or RDMAVM-PERF lines), comma-separated")
}

// collect parses the files and, given a device, runs both tools once per
// size.
func (o *rdmaOptions) collect(ctx context.Context, series string, sizes []int, pr *printer) ([]result.Baseline, error) {
	if series == "" || series == "tcp" {
		series = "rdma"
	}
	var out []result.Baseline
	for _, f := range splitList(o.files) {
		b, err := parsePerftestFile(f, series)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	if o.device == "" {
		return out, nil
	}
	// A size perftest fails at is left out and reported; the others are
	// still measured.
	var errs []error
	for _, tool := range []string{result.KindRDMARead, result.KindRDMASend} {
		for _, sz := range sizes {
			pr.say("running %s on %s, %d bytes", tool, o.device, sz)
			args := append(strings.Fields(o.args), "-s", strconv.Itoa(max(sz, 1)))
			b, err := baseline.RunPerftest(ctx, baseline.PerftestConfig{Tool: tool, Device: o.device, Addr: o.addr,
				Args: args, Series: series})
			if err != nil {
				if ctx.Err() != nil {
					return out, ctx.Err()
				}
				errs = append(errs, err)
				continue
			}
			out = append(out, b...)
		}
	}
	return out, errors.Join(errs...)
}

func parsePerftestFile(path, series string) ([]result.Baseline, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := baseline.ParsePerftest(f, baseline.PerftestOptions{Series: series, Source: path})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// perftestCmd is "kvbench perftest": RDMA baselines alone, as a report to
// merge later.
func perftestCmd(ctx context.Context, args []string) error {
	var o rdmaOptions
	var write, jsonOut, series, sizes string
	fs := flag.NewFlagSet("kvbench perftest", flag.ContinueOnError)
	o.flags(fs)
	fs.StringVar(&sizes, "sizes", "16,256,4KiB,64KiB", "message sizes to run perftest at (with --rdma-device)")
	fs.StringVar(&series, "series", "rdma", "label of the results")
	fs.StringVar(&write, "w", "table", "stdout: table, json, marked or none")
	fs.StringVar(&jsonOut, "json", "", "also write the JSON report to this file")
	if err := parse(fs, args, true); err != nil {
		return err
	}
	if err := checkWrite(write); err != nil {
		return err
	}
	for _, f := range fs.Args() {
		o.files += "," + f
	}
	if o.device == "" && len(splitList(o.files)) == 0 {
		return usageError{"give --rdma-device or perftest output files"}
	}
	sz, err := listOf("sizes", sizes, size)
	if err != nil {
		return err
	}
	bases, err := o.collect(ctx, series, sz, newPrinter(os.Stderr, false))
	if err != nil {
		return err
	}
	rep := &result.Report{Schema: result.SchemaVersion, Meta: []result.Meta{newMeta(series, "none (perftest)", os.Args[1:])}, Baselines: bases}
	return emitBaselines(rep, write, jsonOut)
}
