package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvd-project/kvd/bench/workload"
	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/cli"
)

// parse parses args into fs, mirrors unset flags from KVBENCH_* variables,
// and refuses stray arguments unless positional is true.
func parse(fs *flag.FlagSet, args []string, positional bool) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 && !positional {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	if err := cli.ApplyEnv(fs, "KVBENCH_"); err != nil {
		return usageError{err.Error()}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// listOf parses a comma-separated list with parse.
func listOf[T any](name, s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, p := range splitList(s) {
		v, err := parse(p)
		if err != nil {
			return nil, usageError{fmt.Sprintf("--%s: %v", name, err)}
		}
		out = append(out, v)
	}
	return out, nil
}

func positiveInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad count %q", s)
	}
	return n, nil
}

func size(s string) (int, error) {
	n, err := cli.ParseSize(s)
	if err != nil || n > 1<<30 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int(n), nil
}

func positiveFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) {
		return 0, fmt.Errorf("bad rate %q", s)
	}
	return f, nil
}

func consistencies(name, s string) ([]client.Consistency, error) {
	return listOf(name, s, client.ParseConsistency)
}

func mixes(name, s string) ([]workload.Mix, error) { return listOf(name, s, workload.ParseMix) }
