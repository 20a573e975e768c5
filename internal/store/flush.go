package store

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Durability of Pebble's writes when Pebble runs without its write-ahead
// log (the "wal" mode, raftlog.go): a write is durable once a flush has
// written the memtable holding it to a synced sstable recorded in the
// synced manifest. Batches are put in memtables in the order of their
// sequence numbers and memtables are flushed oldest first, so a completed
// flush whose output reaches sequence number n has made every batch at or
// below n durable, and a crash keeps a prefix of the committed batches.

// flushMark is the largest sequence number completed flushes made
// durable, noted by Pebble's FlushEnd event.
type flushMark struct{ seq atomic.Uint64 }

// note is the FlushEnd listener. A failed flush (retried by Pebble) and
// the flush of an ingestion make nothing durable that the store waits for.
func (m *flushMark) note(info pebble.FlushInfo) {
	if info.Err != nil || info.Ingest {
		return
	}
	var top uint64
	for _, t := range info.Output {
		top = max(top, uint64(t.LargestSeqNum))
	}
	for {
		cur := m.seq.Load()
		if top <= cur || m.seq.CompareAndSwap(cur, top) {
			return
		}
	}
}

// commitDurable commits b and returns once it is durable: synced in
// Pebble's log, or, without one, flushed (with every write before it).
// It runs under the fault guard.
func (s *Store) commitDurable(b *pebble.Batch) error {
	if !s.noPebbleWAL {
		return b.Commit(pebble.Sync)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	return s.db.Flush()
}

// pendingCompaction is a compaction of the log to index that waits until
// Pebble's writes through sequence number seq (the snapshot record, after
// the state through index) are durable (raftlog.go's rule 2).
type pendingCompaction struct {
	index, seq uint64
}

// maxPendingCompactions is how many compactions may wait for Pebble's
// memtable to fill and flush on its own before the store asks for a
// flush. It bounds what the log keeps behind the durable state where the
// state machine writes little per entry (failed compares, lease
// renewals): at a snapshot, the log holds at most the entries since the
// compaction point of the one before the last, about twice what it holds
// with Pebble's log.
const maxPendingCompactions = 1

// compactFlushedWAL compacts the log to the newest pending compaction
// that a completed flush made safe, and asks for a flush (without waiting
// for it) when too many wait. Raft loop only, under the fault guard.
func (s *Store) compactFlushedWAL() error {
	done := s.flushed.seq.Load()
	n := 0
	for n < len(s.walPending) && s.walPending[n].seq <= done {
		n++
	}
	if n > 0 {
		if err := s.wal.Compact(s.walPending[n-1].index); err != nil {
			return err
		}
		s.walPending = append(s.walPending[:0], s.walPending[n:]...)
	}
	if len(s.walPending) > maxPendingCompactions {
		_, err := s.db.AsyncFlush()
		return err
	}
	return nil
}
