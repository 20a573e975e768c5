// Package redisbench is the Redis series of kvd's benchmarks: it runs
// redis-benchmark, the Redis project's own load generator, against kvd's
// Redis protocol (a kvd gateway and a kvd node), against a minimal Go
// server of the protocol (go-floor, bench/respfloor: the bound of a Go
// process here) and against real redis-servers (without persistence, and
// with appendfsync always, the durability kvd gives every acknowledged
// write), rounds alternating the targets, and reports the medians, server
// CPU per operation, the ratios kvd is held to and go-floor's beside
// them. It owns the parsing of redis-benchmark's --csv output.
package redisbench
