package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/kvd-project/kvd/bench/result"
)

// reportCmd is "kvbench report": merge result files (JSON reports, or
// console logs holding marked reports) into one report with plots.
func reportCmd(args []string) error {
	var out, plots, write, require string
	fs := flag.NewFlagSet("kvbench report", flag.ContinueOnError)
	fs.StringVar(&out, "out", "", "write results.{json,md,csv}, baselines.csv and plots into this directory")
	fs.StringVar(&plots, "plots", "png,svg", "plot formats (empty: none)")
	fs.StringVar(&write, "w", "table", "stdout: table, json, marked or none")
	fs.StringVar(&require, "require-series", "", "series that must each have at least one run, comma-separated; if one has none, fail and write nothing")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: kvbench report [flags] FILE...")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, true); err != nil {
		return err
	}
	if err := checkWrite(write); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{"usage: kvbench report [flags] FILE... (result JSON files or console logs)"}
	}
	var reps []*result.Report
	for _, path := range fs.Args() {
		rep, err := result.ReadFile(path)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	rep := result.Merge(reps...)
	if err := requireSeries(rep, splitList(require)); err != nil {
		return err
	}
	if out != "" {
		if err := writeDir(out, rep, splitList(plots)); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "kvbench: wrote %d runs and %d baselines from %d files to %s\n", len(rep.Runs), len(rep.Baselines), len(reps), out)
	}
	return writeStdout(os.Stdout, write, rep)
}

// errMissingSeries: a series --require-series names has no runs.
var errMissingSeries = errors.New("missing series")

// requireSeries fails unless every series in want has at least one run in
// rep (baselines alone do not count: they measure no kvd).
func requireSeries(rep *result.Report, want []string) error {
	have := map[string]int{}
	for _, r := range rep.Runs {
		have[r.Series]++
	}
	var missing []string
	for _, s := range want {
		if have[s] == 0 {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	present := slices.Sorted(maps.Keys(have))
	return fmt.Errorf("%w: no runs of %s (the inputs have runs of: %s); nothing written",
		errMissingSeries, strings.Join(missing, ", "), strings.Join(present, ", "))
}
