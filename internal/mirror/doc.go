// Package mirror keeps a node's table region (internal/table) equal to its
// applied state, so that clients can read it one-sidedly. A Mirror owns
// the table and everything that writes it:
//
//   - applying committed batches (apply.go), a transaction's as one atomic
//     group (atomic.go), so that no one-sided reader sees part of it;
//   - the batch-ahead gate (atomic.go): while the durable state (Pebble)
//     holds a batch the region has not applied, reads that would consult
//     Pebble wait for the batch's Apply;
//   - keys the region could not hold ("missing"): the header's incomplete
//     flag, and the repair loop that puts them back (repair.go);
//   - rebuilds from the durable state, at start and after a snapshot
//     install (rebuild.go), and repacks of a fragmented region;
//   - the lease word (lease.go), withheld while the region is rebuilt;
//   - admission's reservation of room for writes (reserve.go), which must
//     also keep room for the missing keys;
//   - RPC reads that answer from the region or, for a key it lacks, from
//     the durable state (read.go).
//
// The raft node feeds it through Apply, Restore, BatchAhead and Events
// (the methods of kv.Publisher, kv.Publisher and kv.Publisher)
// and OnLease; it reads the durable state back through Store. Events go on
// to a Sink (the node's watch history, internal/watch).
//
// One lock (the table lock) serialises every write to the table and the
// reads that must see it at a batch boundary; the lease word has a lock of
// its own, so that publishing the lease never waits behind an apply.
package mirror
