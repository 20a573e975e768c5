// Package etcdseries is the etcd series of kvd's benchmarks: etcd's own
// benchmark tool (go.etcd.io/etcd/v3/tools/benchmark, built into
// bin/etcd-benchmark by scripts/etcd-benchmark.sh) run, in one run and with
// the same flags, against a real 3-member etcd, against kvd's nodes' etcd
// listeners and against a kvd gateway. Targets alternate within every
// round; the table takes each point's median over the rounds and gives
// kvd's ratios to etcd, with kvd's goals against etcd marked met or not.
//
// parse.go reads the tool's text reports, plan.go says which points a run
// measures, run.go drives the rounds, table.go writes the markdown and
// procs.go starts the etcd members and the gateway.
package etcdseries
