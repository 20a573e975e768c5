// Package watch keeps a node's recent history of applied writes and serves
// watchers from it: each watcher reads the events of its key or prefix, in
// commit order, from a version on.
//
// The history (Hub) is a bounded ring in memory, fed by the Raft apply
// loop (Publish) with every write of every applied batch, in log order, so
// any node, a follower too, yields events in commit order. It holds at
// most Config.HistoryEvents events and Config.HistoryBytes bytes of keys
// and values, beyond which only the newest version's events (one write,
// a transaction's or a lease revoke's) are ever kept, whole; older events
// are evicted, and a watch from a version whose
// events are (partly) gone fails with a *CompactedError naming the oldest
// version still served. The history starts empty when the process starts
// and after the node installs a snapshot (Reset): versions up to that
// index are then compacted on this node, though other nodes may still hold
// them.
//
// A watcher is a cursor into the ring, not a queue of its own: its pending
// events are the ring's events past its cursor, so a slow watcher holds no
// memory beyond the ring's bound. A watcher that falls so far behind that
// the ring evicts events of its key or prefix it has not sent yet is
// dropped (Next fails with a *CompactedError whose Slow is set): its client
// may resume from its last version on a node that still holds it, or
// learns the history is gone. Evicted events of other keys cost a watcher
// nothing, however far behind its cursor was: the Hub indexes its
// watchers by key (and keeps those of a prefix apart) so that eviction
// marks only the ones it robs.
package watch
