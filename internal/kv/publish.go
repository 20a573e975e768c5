package kv

import "github.com/kvd-project/kvd/internal/revision"

// Write is one applied write, as the Publisher sees it.
type Write struct {
	// Meta is the key's revision metadata after the write; a delete's is
	// only its revision (Meta.Mod).
	Meta       revision.Meta
	Key, Value []byte
	Deleted    bool
	// Atomic is set on every Write of an Apply call whose batch holds an
	// entry that wrote more than one key (a transaction), or wrote one key
	// twice with another key's write between (collapsing the repeat moved
	// the key's write past it): a cache read without locks must then make
	// the whole call visible at once, or a reader could see some of the
	// transaction's writes and not the others, or a later write and not
	// an earlier one (the server's region mirror does it).
	Atomic bool
	// absent: a Delete of a key that did not exist (it changed nothing,
	// so it is no event for watchers).
	absent bool
}

// Publisher receives the state machine's effects, for a cache such as the
// server's table region. Its methods are called from the raft loop, one at
// a time, so they must not block for long (every write and every heartbeat
// waits for them) and must not call back into the Store or its node except
// Get, ForEach, Status, Members and PeerAddr.
type Publisher interface {
	// Apply reports one committed batch: each key now holds its Write's
	// value with its Meta, or was deleted; rev is the store revision
	// after the batch, which the region publishes once the batch's writes
	// are visible. It is
	// called only after the Pebble batch holding the writes has committed,
	// so the cache never shows anything that a restart would lose, and
	// before the next batch commits, so Pebble is never more than this one
	// batch ahead of the cache. Calls come in log order, one Write per key
	// (the key's final state in the batch). A cache that applies a whole
	// call atomically for its readers therefore always shows the state of
	// a batch boundary. The slice is reused after the call; keys and values
	// must not be modified and may be retained.
	Apply(ws []Write, rev uint64)
	// Restore reports that a snapshot from the leader replaced the whole
	// applied state: the cache must be rebuilt from ForEach.
	Restore()
	// BatchAhead is called before a batch with writes is committed to
	// Pebble: Pebble is about to run ahead of the cache by that batch; the
	// batch's Apply call follows. Until it, a reader that consults Pebble
	// for a key the cache lacks could see some of the batch's writes there
	// while the cache still shows others as they were: a state that never
	// held (the batch's writes are ordered: a transaction that read one key
	// and wrote another depends on the write before it, and a multi-key
	// read must see all or none of them). The cache can hold such reads
	// back until the Apply. If the commit fails, the node stops and no
	// Apply follows.
	BatchAhead()
	// Events reports every write, for change notification (watches):
	// Apply collapses a batch's writes to one per key, which a watcher
	// must not miss. It reports the writes of one applied batch in log
	// order, each one (repeats of a key included, deletes of absent keys
	// left out), right after the batch's Apply call; rev is the store
	// revision after the batch: the events up to it are all reported.
	// With reset, the batch installed a snapshot: writes up to rev were
	// never reported (ws is empty). It is called on every batch that
	// moved the revision, so it must not block. The slice is reused after
	// the call; keys and values may be retained.
	Events(ws []Write, rev uint64, reset bool)
}

// nopPublisher is the Publisher of a Store configured without one.
type nopPublisher struct{}

func (nopPublisher) Apply([]Write, uint64)        {}
func (nopPublisher) Restore()                     {}
func (nopPublisher) BatchAhead()                  {}
func (nopPublisher) Events([]Write, uint64, bool) {}
