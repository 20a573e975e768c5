// Package kv is kvd's key/value state machine, replicated by a raft node
// (package raft, which calls it through raft.StateMachine). It owns:
//
//   - the command codec (command.go): PUT, DELETE, transactions and the
//     TTL lease commands, as the Data of raft entries;
//   - their evaluation (machine.go, txn.go, leaseapply.go): each Ready's
//     committed commands are applied into the Pebble batch that also holds
//     the Ready's log entries and applied index (internal/store), so a
//     restart never sees half an apply; a transaction's compares are
//     evaluated at apply, on every node alike, against that batch as built
//     so far;
//   - publishing applied writes to a cache (Publisher, publish.go: the
//     server's region mirror), after the batch commits and before the
//     next, collapsed to one write per key and marked Atomic when a reader
//     of a partly applied call could see a state no index had; every write
//     again, uncollapsed, for watches (Publisher.Events);
//   - the TTL leases (lessor.go, leasecmd.go): a client's lease and the
//     keys attached to it are replicated state; only the leader times them
//     and proposes a lease's revoke when it expires;
//   - the Store (store.go): Put, Delete, Txn, the lease calls, and reads of
//     the applied state (Get, GetMany, Scan, ForEach, View for backups),
//     over the node's proposal API; a write admitted against the server's
//     state carries its raft.Admission.
//
// Limits are internal/limits' (keys, values, commands) and this package's
// (leases: MaxLeases, MaxLeaseKeys, MinLeaseTTL, MaxLeaseTTL); the ones
// checked at apply are constants, as every node must decide alike
// (Config.Knobs lowers them for tests, on every node of a test alike).
package kv
