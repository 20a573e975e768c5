// Package redisapi serves the Redis protocol (RESP2 and RESP3, see
// internal/resp) over kvd's client library: the subset of Redis' commands
// that maps honestly onto a linearizable, replicated string store, with
// Redis' reply shapes and error texts (docs/redis-compatibility.md).
//
// A node serves it beside its own listener (kvd --redis-listen), and so
// can any process that holds a client. Every command goes through the
// cluster: GETs are the client's one-sided linearizable reads; a write is
// acknowledged once it is committed. Read-modify-write commands (INCR,
// APPEND, SETRANGE, ...) and MULTI/EXEC read what they need, compute the
// result, and commit it as one kvd transaction that compares the mod
// revision of every key read: a concurrent change makes the transaction
// apply nothing, and the command runs again on the new values, so no
// update is lost. WATCH adds compares on the watched keys' mod revisions
// as they were when watched.
//
// Plain SETs of all connections commit in groups (internal/putgroup), and
// a connection's pipelined plain SETs join them as one run (setrun.go).
// Single-key read-modify-writes of one key are batched (batch.go).
//
// Per-key expiry is a TTL lease per key (ttl.go).
package redisapi
