// Package bench drives a kvd cluster through the Go client and measures it:
// it owns the benchmark loop (closed loop at a fixed concurrency, or open
// loop at a target rate with latencies measured from each operation's
// intended start, so a stalled server cannot hide its queue), the preload
// of the key space, the sweep of points a run is made of, and the
// accounting that turns client counters and server CPU time into a
// result.Run.
//
// Subpackages hold the parts with a life of their own: workload (keys and
// operations), latency (histograms), procstat (server CPU), baseline (raw
// transport round trips), cluster (starting kvd processes), result (the
// data model and its files), report and plot (rendering). cmd/kvbench is
// the command line over all of it.
package bench
