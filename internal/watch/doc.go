// Package watch keeps a node's recent history of applied writes and serves
// watchers from it: each watcher reads the events of its key or prefix, in
// commit order, from a revision on.
//
// The history (Hub) is a bounded ring in memory, fed by the Raft apply
// loop (Publish) with every write of every applied batch, in log order, so
// any node, a follower too, yields events in commit order. It holds at
// most Config.HistoryEvents events and Config.HistoryBytes bytes of keys
// and values, beyond which only the newest revision's events (one write,
// a transaction's or a lease revoke's) are ever kept, whole; older events
// are evicted. The ring starts empty when the process starts and after
// the node installs a snapshot (Reset).
//
// Behind the ring is the node's stored history (Config.Store: every
// change since the cluster's compaction revision, on disk, identical on
// every member). A watcher that needs events the ring does not hold (a
// watch from an old revision, a node that restarted or installed a
// snapshot since, a watcher that fell behind) reads them from the store,
// a bounded batch per Next, and moves back to the ring once it reaches
// what the ring holds (stored.go). A watch from a revision at or below
// the compaction revision fails with a *CompactedError naming the oldest
// revision a watch can start from. Without a store (tests), what the ring
// lacks is compacted on this node, and a watcher that falls behind is
// dropped (Slow).
//
// Next ends at a revision's end unless one revision alone is past its
// bounds (the server then flags the pieces as fragments). A PrevKV watcher
// gets each event's previous value from the store: the stored history's
// record before it; for events from memory, a read at the revision before
// each, or one pass over the stored changes of a message dense in
// revisions. Other watchers pay nothing for it.
//
// A watcher is a cursor, not a queue of its own: its pending events are
// the ring's (or the store's) past its cursor, so a slow watcher holds no
// memory beyond the ring's bound. Evicted events of other keys cost a
// watcher nothing, however far behind its cursor was: the Hub indexes its
// watchers by key (and keeps those of a prefix apart) so that eviction
// marks only the ones it robs.
package watch
