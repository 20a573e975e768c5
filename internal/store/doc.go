// Package store owns everything a kvd raft node keeps on disk: one Pebble
// database holding the ConfState and snapshot metadata, the member address
// book and the applied key/value state, and the raft log with its
// HardState, in one of two places (Options.RaftLog).
//
// It implements raft.Storage and offers one write path, Update, so that a
// Ready's log append, HardState and the state-machine writes of its
// committed entries (with the new applied index) commit together: a
// restart never sees half an apply, and the applied index always names
// exactly the state on disk.
//
// With Options.RaftLog "wal" (the default) the raft log and HardState
// live in an internal/wal log in the data directory's wal/ subdirectory, and an
// Update writes the state machine's effects to Pebble without a sync of
// their own, and Pebble runs without its write-ahead log: the log's one
// fdatasync per Ready makes the Ready durable, Pebble's flushes make its
// state durable (flush.go), and Open replays the log from the applied
// index Pebble persisted.
// raftlog.go states the rules that keep this safe and the conversion of a
// directory from the "pebble" mode. With "pebble" the log and HardState
// are in the same Pebble database, and an Update is one synced batch.
//
// Key layout (Pebble's default bytewise order):
//
//	"m" + name               metadata: HardState, ConfState, applied index,
//	                         latest snapshot, log truncation point, KV generation,
//	                         cluster id, data format (format.go), raft log mode
//	                         (HardState and truncation point: "pebble" mode only)
//	"l" + be64(index)        raft log entries (marshaled raftpb.Entry; "pebble"
//	                         mode only)
//	"p" + be64(id)           member address book: learner flag + address
//	"e" + be64(gen) + ...    applied TTL leases and their keys (lease.go)
//	"r" + be64(gen) + ...    store and compaction revisions, and the history:
//	                         every write since the compaction revision (and
//	                         each key's last one at or below it), keyed by
//	                         its revision (revision.go, history.go,
//	                         compact.go)
//
// The history is the KV state: a key's value is its newest write at or
// below the store revision. The key index (keyindex.go), in memory, finds
// it: for every key, its writes in revision order, built at Open from the
// history (etcd's treeIndex). So a PUT writes one record to Pebble, at the
// next revision; the formats before 7 also kept each key's state, and an
// index of the history, in records keyed by key ("k" + be64(gen) + key,
// and "h" in the revision space), which Open migrates away (migrate.go).
//
// Pebble tables end at the boundaries of these groups (spans.go), so that
// the groups whose keys only grow (the log, the history) are not
// rewritten with the others at every compaction.
//
// The applied KV state lives under a generation number so that a snapshot
// received from the leader can be written in bounded pieces under a fresh
// generation, invisible to readers, and then made current by one small batch
// that also drops the old generation (Staged, Update.InstallSnapshot), with
// the key index built from it. Stray generations left by a crash
// mid-transfer are deleted at Open.
//
// Storage faults (fault.go): a write the disk refuses (ENOSPC, EROFS, EIO,
// any failed write or fsync) or an unrecoverable error Pebble reports is
// the store's fault, and final. From then on nothing reaches the disk (the
// goroutines that meet the fault, Pebble's included, are parked rather than
// handed an error Pebble would panic on), every write fails with a
// *FaultError (ErrFault) at once, and Options.OnFault is told. What is on
// disk is what a crash at that moment would have left: Open recovers it once
// the disk is fixed, with everything that was synced. Pebble's log lines are
// rate-limited (pebblelog.go).
//
// Concurrency: the raft.Storage methods, Update and CreateSnapshot belong to
// one goroutine (the raft loop), which also writes the key index (as does
// the compactor, keyindex.go). Get, ForEach (a point-in-time view), Scan
// (a range of one snapshot, with its applied index), Applied, Members,
// Member, NumMembers, ClusterID, SetClusterID, NewStaged, Checkpoint and
// View (the whole state at one applied index, for backups) may be called
// from any goroutine, and a Checkpoint may be shared; a Staged is used by
// one goroutine at a time. So may RangeAt and Changes (the history, from
// one snapshot), Revision and CompactRevision. A goroutine of the store's
// own deletes the history below the compaction revision (compact.go).
// Restore (a backup into an empty store) runs
// before any raft loop uses the store. Nothing may be used after Close,
// and Close must wait for Staged transfers, Checkpoint and View holders to
// finish.
package store
