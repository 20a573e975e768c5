package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kvd-project/kvd/bench/result"
)

// reportCmd is "kvbench report": merge result files (JSON reports, or
// console logs holding marked reports) into one report with plots.
func reportCmd(args []string) error {
	var out, plots, write string
	fs := flag.NewFlagSet("kvbench report", flag.ContinueOnError)
	fs.StringVar(&out, "out", "", "write results.{json,md,csv}, baselines.csv and plots into this directory")
	fs.StringVar(&plots, "plots", "png,svg", "plot formats (empty: none)")
	fs.StringVar(&write, "w", "table", "stdout: table, json, marked or none")
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
	if out != "" {
		if err := writeDir(out, rep, splitList(plots)); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "kvbench: wrote %d runs and %d baselines from %d files to %s\n", len(rep.Runs), len(rep.Baselines), len(reps), out)
	}
	return writeStdout(os.Stdout, write, rep)
}
