// Package respfloor is the go-floor target of the Redis series
// (bench/redisbench): the least a Go server does per unpipelined request
// on this machine. It answers GET, SET, INCR, MSET and PING from a map in
// its own memory: a goroutine per connection, a buffered reader and
// writer, a flush whenever the reader has nothing more buffered, and
// nothing else (no replication, no durability, no expiry, no other
// commands beyond what redis-benchmark sends: CONFIG GET, and an error for
// the rest).
//
// What it says: a Go process serving Redis' protocol from its own memory
// reaches this rate against redis-server in the same run; kvd's gateway,
// which does strictly more per GET (a read from a node), stays below it.
// It is a measuring stick, not a Redis: it owns its request parser, a
// minimal one, so kvd's RESP code is not part of the bound.
//
// kvbench runs it as its own process (kvbench resp-floor --listen ADDR),
// so its CPU is charged as the other targets' is.
package respfloor
