// Package redisbench is the Redis series of kvd's benchmarks: it runs
// redis-benchmark, the Redis project's own load generator, against kvd's
// Redis protocol (a kvd gateway and a kvd node) and against real
// redis-servers (without persistence, and with appendfsync always, the
// durability kvd gives every acknowledged write), rounds alternating the
// targets, and reports the medians, server CPU per operation and the ratios
// kvd is held to. It owns the parsing of redis-benchmark's --csv output.
package redisbench
