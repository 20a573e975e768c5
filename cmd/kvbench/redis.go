package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvd-project/kvd/bench/redisbench"
)

// redisCmd is "kvbench redis": redis-benchmark against kvd's gateway, a
// kvd node, this executable's resp-floor command (go-floor) and two
// redis-servers (see bench/redisbench). It writes redis.md and redis.csv
// into --out and prints the markdown.
func redisCmd(ctx context.Context, args []string) error {
	var cfg redisbench.Config
	var pipelines, tests, targets, out string
	var quiet bool
	fs := flag.NewFlagSet("kvbench redis", flag.ContinueOnError)
	fs.StringVar(&cfg.Bin, "bin", "bin", "directory holding the kvd binary")
	fs.StringVar(&cfg.RedisServer, "redis-server", "", "redis-server to compare with (default: from PATH, else a link named redis-server to redis-check-rdb)")
	fs.StringVar(&cfg.RedisBenchmark, "redis-benchmark", "redis-benchmark", "the load generator")
	fs.IntVar(&cfg.Nodes, "nodes", redisbench.DefaultNodes, "kvd cluster size")
	fs.IntVar(&cfg.Clients, "clients", redisbench.DefaultClients, "redis-benchmark -c")
	fs.IntVar(&cfg.Requests, "requests", redisbench.DefaultRequests, "redis-benchmark -n, per test and invocation")
	fs.IntVar(&cfg.DataSize, "data-size", redisbench.DefaultDataSize, "redis-benchmark -d (value bytes)")
	fs.IntVar(&cfg.Keyspace, "keyspace", 0, "redis-benchmark -r (0: no -r, one key)")
	fs.StringVar(&pipelines, "pipeline", "1,16", "redis-benchmark -P depths")
	fs.StringVar(&tests, "tests", "set,get,incr,mset", "redis-benchmark -t tests, each run on its own, in this order")
	fs.StringVar(&targets, "targets", strings.Join(redisbench.Targets(), ","), "targets, a subset of the default (go-floor: this kvbench's resp-floor command)")
	fs.IntVar(&cfg.Rounds, "rounds", redisbench.DefaultRounds, "rounds (the targets' order rotates each round; the report takes medians)")
	fs.DurationVar(&cfg.Timeout, "invocation-timeout", redisbench.DefaultTimeout, "bound on one redis-benchmark invocation")
	fs.StringVar(&out, "out", "", "directory for redis.md and redis.csv (empty: none)")
	fs.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	var err error
	if cfg.Pipelines, err = listOf("pipeline", pipelines, positiveInt); err != nil {
		return err
	}
	cfg.Tests, cfg.Targets = splitList(tests), splitList(targets)
	if cfg.Kvbench, err = os.Executable(); err != nil {
		return err
	}
	if !quiet {
		cfg.Progress = os.Stderr
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	rep, runErr := redisbench.Run(ctx, cfg)
	if rep == nil {
		return runErr
	}
	if err := writeRedisReport(rep, out); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

func writeRedisReport(rep *redisbench.Report, out string) error {
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		return err
	}
	if out == "" {
		return nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		write func(*os.File) error
	}{
		{"redis.md", func(w *os.File) error { return rep.WriteMarkdown(w) }},
		{"redis.csv", func(w *os.File) error { return rep.WriteCSV(w) }},
	} {
		w, err := os.Create(filepath.Join(out, f.name))
		if err != nil {
			return err
		}
		err = f.write(w)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}
