// Package workload generates the operations a benchmark issues: which
// operation comes next (GET or PUT, by a YCSB-style mix), which key it names
// (uniform or Zipfian over a fixed key space) and the bytes of keys and
// values.
//
// A Generator belongs to one goroutine; it is deterministic for a seed and
// allocates nothing per operation, so it never shows up in the latencies it
// helps measure.
package workload
