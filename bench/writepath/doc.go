// Package writepath sets kvd's PUT beside the floors under it, measured in
// one window: the floor (bench/floor: three bare processes that batch,
// replicate, fdatasync and reply), the Pebble floor (the same with each
// node's log and state in Pebble), the state floor (the file log, then
// each PUT's state and history written to Pebble), kvd with each of its
// Raft logs, and
// optionally a baseline build of kvd (the previous commit's).
//
// A run is rounds of every point, the order rotated by one each round, so
// no point always runs first on a cold machine or last on a hot one. Each
// point reports the server CPU per PUT and the PUTs per second in the
// 64-instance shape, and kvd's points the median latency of one client's
// PUTs. The report gives per point the median over the rounds, the CPU
// over the floor's and the throughput and latency over the baseline's,
// and every round's values; it is written only when every point of every
// round was measured (Report.Save), since a ratio with a missing side is
// no measurement.
//
// The package knows nothing of how a point is measured: each Point
// carries its Measure function (cmd/kvbench wires the floors and kvd
// clusters in), so the rounds and the arithmetic are tested on their own.
package writepath
