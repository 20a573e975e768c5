// Package floor measures the cheapest replicated PUT this machine can do:
// the server CPU a PUT costs when nothing but its unavoidable work is done,
// as a floor under kvd's own figure in the same shape.
//
// A floor cluster is one leader and some followers, each its own process
// (as kvd's nodes are), talking over loopback TCP. Each client has its own
// connection and one request in flight (kvbench's --conns N --clients N).
// The leader gathers every request that arrived since its last batch into
// one batch, sends the batch to every follower in one write each, writes it
// to its own log and fdatasyncs it, waits for a majority (itself and
// enough followers) to have synced it, and replies to each client with one
// write. A follower writes each batch it receives and fdatasyncs it before
// acknowledging. That is all: no Raft state, no key/value state, no index,
// no checksums, no per-request goroutine hand-offs beyond one channel send.
//
// The log is a preallocated, already-written file overwritten in a cycle,
// the cheapest durable write on Linux (a recycled WAL, as Pebble's is):
// fdatasync then has no file-size or extent metadata to journal.
//
// With Config.Pebble each node's log is instead a Pebble database, tuned
// as kvd's store is, where every PUT is a log entry and a state write in
// the batch's one synced commit (PebbleLog): the floor of any design that,
// as kvd's does, keeps the Raft log and the state in Pebble.
//
// With Config.State each node keeps the plain file log and, after each
// batch is synced, writes every PUT's value to a state key and a history
// record at its index in a Pebble database opened as kvd's store opens
// its own beside a WAL (no Pebble log, no sync of its own): StateLog, the
// floor of kvd's design up to its data format 6, which kept each write as
// a state record and a history record in Pebble, its Raft log a file
// beside it (from format 7 kvd writes the history record alone, so its
// floor lies between this one and the plain one).
//
// What a floor run says: no implementation with kvd's guarantees
// (replicated to a majority and fsynced before the reply, one connection
// per client) spends less server CPU per PUT on this machine than the
// floor does; kvd's figure over the floor's, from the same run, is the
// overhead of everything else kvd does.
package floor
