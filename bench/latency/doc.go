// Package latency records operation latencies in HDR histograms and
// summarises them as percentiles, in microseconds.
//
// A Recorder belongs to one goroutine (recording takes no lock and
// allocates nothing); a benchmark gives each worker its own and merges them
// when the run is over.
package latency
