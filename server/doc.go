// Package server is a kvd node: it registers the node's table region (for
// remote READ through a transport), opens the Raft node, and answers
// client RPCs: PUT and DELETE (proposed through Raft, acknowledged once
// committed and applied), transactions and compare-and-swap (txn.go:
// checked and admitted here, evaluated by every node when the entry is
// applied), two-sided GETs (the RPC fallback, and the ReadIndex level),
// range scans (scan.go: pages read from the applied state in Pebble,
// answered only once the region has caught up with them), status and
// membership, watches (watch.go: every applied write goes to the node's
// bounded event history, internal/watch, from which each client
// connection's watches are sent in commit order), TTL leases (lease.go),
// and backups (snapshot.go: the leader's whole state at one index,
// streamed in chunks; restore.go: a new node's data directory written
// from one). It also owns connections and their limits (limits.go), the
// server's metrics, and the freeze fault (freeze.go).
//
// The region itself is the region mirror's (internal/mirror): the Raft
// node applies to it, and it keeps the region equal to the applied state,
// repairs and rebuilds it, publishes the lease word, and reserves room for
// the writes the leader admits. The handlers here are adapters from wire
// requests to calls on the node and the mirror.
//
// One-sided GETs never reach this package: clients READ the region, and the
// transport serves those READs without calling server code.
//
// The region is a cache of the durable state in Pebble (package raft). It is
// rebuilt from that state at start, before the listener accepts anybody, and
// after a snapshot is installed; while it is being rebuilt the header's
// lease word is cleared, so linearizable readers refuse it.
package server
