// Package server is a kvd node: it owns the node's table region (registered
// for remote READ through a transport), keeps it equal to the node's applied
// Raft state, and answers client RPCs: PUT and DELETE (proposed through
// Raft, acknowledged once committed and applied), transactions and
// compare-and-swap (txn.go: checked and admitted here, evaluated by every
// node when the entry is applied), two-sided GETs (the RPC fallback, and
// the ReadIndex level), range scans (scan.go: pages read from the applied
// state in Pebble, answered only once the region has caught up with them),
// status and membership, watches (watch.go: every applied write goes
// to the node's bounded event history, internal/watch, from which each
// client connection's watches are sent in commit order), and backups
// (snapshot.go: the leader's whole state at one index, streamed in
// chunks; restore.go: a new node's data directory written from one).
//
// A batch holding a transaction that wrote several keys is mirrored into
// the region as one atomic group, so that no one-sided reader sees part of
// it (atomic.go, docs/consistency.md "Transactions").
//
// One-sided GETs never reach this package: clients READ the region, and the
// transport serves those READs without calling server code.
//
// The region is a cache of the durable state in Pebble (package raft). It is
// rebuilt from that state at start, before the listener accepts anybody, and
// after a snapshot is installed; while it is being rebuilt the header's
// lease word is cleared, so linearizable readers refuse it.
package server
