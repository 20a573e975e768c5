// Package monoclock owns the one clock a kvd process publishes to others:
// nanoseconds since the process started, read from Go's monotonic clock.
//
// A node states its read lease's expiry on this clock (in the table
// region's header) and answers clock RPCs with it, so a client can judge
// the lease on its own clock (docs/consistency.md). Only the clock's rate
// matters to that argument, never its value: each process has its own
// origin, and a restarted process starts a new clock, which clients never
// mix with the old one because a restart also replaces the connection and
// the region.
package monoclock
