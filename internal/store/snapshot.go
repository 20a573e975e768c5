package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// CreateSnapshot records a raft snapshot of the state as of Applied (index,
// term, ConfState, and the address book as Data), compacts the log up to and
// including compactTo (clamped to the snapshot index; 0 keeps the log), and
// makes a Checkpoint of exactly that state for sending to followers.
//
// It must be called from the raft loop, between Updates, so that nothing is
// applied meanwhile. The write is not synced: losing it costs only the
// compaction, and Open takes a fresh snapshot anyway.
func (s *Store) CreateSnapshot(compactTo uint64) (*pb.Snapshot, error) {
	s.mu.Lock()
	index := s.applied
	if index == 0 || index < s.snap.GetMetadata().GetIndex() {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: nothing applied beyond snapshot %d", ErrBadSnapshot, s.snap.GetMetadata().GetIndex())
	}
	term, err := s.termLocked(index)
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("store: snapshot at %d: %w", index, err)
	}
	members := make([]Member, 0, len(s.members))
	for _, m := range s.members {
		members = append(members, m)
	}
	snap := &pb.Snapshot{
		Data: EncodeMembers(members),
		Metadata: &pb.SnapshotMetadata{
			ConfState: proto.CloneOf(s.cs),
			Index:     new(index),
			Term:      new(term),
		},
	}
	pb.EnsureSnapshot(snap)
	old := s.trunc
	trunc := old
	compactTo = min(compactTo, index)
	if compactTo > trunc.index {
		t, err := s.termLocked(compactTo)
		if err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("store: compact to %d: %w", compactTo, err)
		}
		trunc = truncState{compactTo, t}
	}
	s.mu.Unlock()

	b := s.db.NewBatch()
	defer func() {
		if b != nil {
			b.Close()
		}
	}()
	data, err := proto.Marshal(snap)
	if err != nil {
		return nil, err
	}
	if err := b.Set(keySnapshot, data, nil); err != nil {
		return nil, err
	}
	if s.wal != nil && (trunc != s.trunc || len(s.walPending) > 0) {
		wb := b
		b = nil // compactWAL's to close
		return s.compactWAL(wb, snap, trunc)
	}
	if trunc != s.trunc {
		if err := b.Set(keyTrunc, trunc.encode(), nil); err != nil {
			return nil, err
		}
		// From the last truncation on, not the log's first key: the
		// tombstone, and the table it is flushed into, then span only the
		// entries it deletes, and Pebble's compactions of the log take in
		// no more than those (BenchmarkPutCPU: a fifth fewer bytes).
		if err := b.DeleteRange(logKey(old.index+1), logKey(trunc.index+1), nil); err != nil {
			return nil, err
		}
	}
	err, finished := s.guard(func() error { return b.Commit(pebble.NoSync) })
	if !finished {
		b = nil // abandoned inside Pebble (fault.go)
	}
	if err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	s.snapshotTaken(snap, trunc)
	return snap, nil
}

// snapshotTaken publishes a snapshot CreateSnapshot recorded, with the
// log's truncation point.
func (s *Store) snapshotTaken(snap *pb.Snapshot, trunc truncState) {
	s.mu.Lock()
	s.snap = snap
	if trunc != s.trunc {
		s.trunc = trunc
		s.cacheTrim(trunc.index)
	}
	s.mu.Unlock()
	md := snap.GetMetadata()
	s.setCheckpoint(md.GetIndex(), md.GetTerm())
}

// compactWAL is CreateSnapshot's write in the "wal" mode when it compacts
// the log, which it may only do once the state through trunc.index is
// durable in Pebble (raftlog.go's rule 2). With Pebble's own log, the
// snapshot record goes to Pebble synced, which makes the state before it
// durable, and the log is compacted at once: one synced Pebble write per
// compaction. Without it, the compaction waits (walPending) for a flush
// that covers the snapshot record, one Pebble makes when its memtable
// fills: the log is compacted to the newest compaction a flush made safe.
func (s *Store) compactWAL(b *pebble.Batch, snap *pb.Snapshot, trunc truncState) (*pb.Snapshot, error) {
	err, finished := s.guard(func() error {
		if !s.noPebbleWAL {
			if err := b.Commit(pebble.Sync); err != nil {
				return err
			}
			return s.wal.Compact(trunc.index)
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		s.walPending = append(s.walPending, pendingCompaction{index: trunc.index, seq: uint64(b.SeqNum())})
		return s.compactFlushedWAL()
	})
	if finished {
		b.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	s.snapshotTaken(snap, trunc)
	return snap, nil
}

// ensureSnapshot is Open's last step: make sure a snapshot (and a matching
// Checkpoint, which does not survive a restart) covers the applied state.
func (s *Store) ensureSnapshot() error {
	switch idx := s.snap.GetMetadata().GetIndex(); {
	case s.applied == 0:
		return nil
	case s.applied == idx:
		s.setCheckpoint(idx, s.snap.GetMetadata().GetTerm())
		return nil
	}
	_, err := s.CreateSnapshot(0)
	return err
}

// Checkpoint is a consistent, read-only view of the KV state as of a raft
// snapshot, kept so a lagging follower can be sent exactly that state. It
// is reference counted: the store holds one reference to the latest, and
// each sender Acquires its own.
type Checkpoint struct {
	snap  *pebble.Snapshot
	gen   uint64
	index uint64
	term  uint64
	refs  atomic.Int32
}

func (s *Store) setCheckpoint(index, term uint64) {
	s.genMu.RLock()
	cp := &Checkpoint{snap: s.db.NewSnapshot(), gen: s.gen, index: index, term: term}
	s.genMu.RUnlock()
	cp.refs.Store(1)
	s.cpMu.Lock()
	old := s.checkpoint
	s.checkpoint = cp
	s.cpMu.Unlock()
	if old != nil {
		old.Release()
	}
}

// Checkpoint returns the checkpoint of the latest snapshot with a reference
// the caller must Release, or nil if there is none.
func (s *Store) Checkpoint() *Checkpoint {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	if s.checkpoint != nil {
		s.checkpoint.refs.Add(1)
	}
	return s.checkpoint
}

// Index and Term name the raft snapshot the checkpoint belongs to.
func (c *Checkpoint) Index() uint64 { return c.index }
func (c *Checkpoint) Term() uint64  { return c.term }

// scan calls fn with every record in [lower, upper), its key less the
// first header bytes, in key order.
func (c *Checkpoint) scan(lower, upper []byte, header int, fn func(key, raw []byte) error) error {
	it, err := c.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := fn(it.Key()[header:], it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// Release drops a reference; the last one closes the Pebble snapshot.
func (c *Checkpoint) Release() {
	if c.refs.Add(-1) == 0 {
		c.snap.Close()
	}
}

// stageFlushBytes bounds the batch a Staged transfer accumulates in memory.
const stageFlushBytes = 4 << 20

// Staged receives a snapshot's KV state under a fresh generation, invisible
// to readers until Update.InstallSnapshot makes it current. Its writes are
// not synced: the install batch is, and Pebble's WAL is sequential.
//
// A Staged is used by one goroutine at a time. Unless installed, it must be
// Discarded.
type Staged struct {
	s           *Store
	b           *pebble.Batch
	gen         uint64
	index, term uint64
	keyBuf      []byte
	consumed    bool
	// wrote: a batch of this transfer was committed (or its commit was
	// cut short by a fault), so its generation may hold data to delete.
	wrote bool
	// keys holds the Pebble keys the transfer staged, each after its
	// uvarint length, while they fit in discardPointBytes (nil after, and
	// tooMany): an abandoned small transfer is deleted key by key, not by
	// range deletions.
	keys    []byte
	tooMany bool
	// done, if set, runs once when the data is discarded or installed.
	done func()
}

// discardPointBytes bounds the keys an abandoned transfer deletes one by
// one; a larger one is deleted by range. A peer session can begin and
// abandon transfers at will (a 'B' frame, a 'C' frame of a few records, an
// 'S' frame the filter drops), and every range deletion Pebble holds made
// later reads of the store slower (1000 scans took 4 ms, and 3 minutes
// after 200,000 abandoned transfers). Bounding by bytes rather than by
// keys makes a peer send at least this much for each pair of range
// deletions it makes the node write (at 64 keys, 820 bytes sufficed).
const discardPointBytes = 1 << 20

// note remembers a key the transfer staged, for Discard.
func (st *Staged) note(key []byte) {
	switch {
	case st.tooMany:
	case len(st.keys)+binary.MaxVarintLen64+len(key) > discardPointBytes:
		st.keys, st.tooMany = nil, true
	default:
		st.keys = binary.AppendUvarint(st.keys, uint64(len(key)))
		st.keys = append(st.keys, key...)
	}
}

// OnDone sets f to run once, when the staged data is discarded or an
// install takes it over: the holder's accounting of staged data lasts
// until then, wherever the data has gone meanwhile.
func (st *Staged) OnDone(f func()) { st.done = f }

func (st *Staged) finishAccounting() {
	if f := st.done; f != nil {
		st.done = nil
		f()
	}
}

// NewStaged starts receiving the data of the snapshot at (index, term).
func (s *Store) NewStaged(index, term uint64) *Staged {
	return &Staged{s: s, b: s.db.NewBatch(), gen: s.nextGen.Add(1), index: index, term: term}
}

// Index and Term name the snapshot being received.
func (st *Staged) Index() uint64 { return st.index }
func (st *Staged) Term() uint64  { return st.term }

// set stages one record under its database key k (in st.keyBuf), and
// flushes the batch once it is large.
func (st *Staged) set(k, raw []byte) error {
	if st.b == nil {
		return st.s.fault.err() // an earlier flush was cut short by a fault
	}
	st.keyBuf = k
	st.note(k)
	if err := st.b.Set(k, raw, nil); err != nil {
		return err
	}
	if st.b.Len() >= stageFlushBytes {
		return st.flush()
	}
	return nil
}

// Finish writes whatever Add has buffered; no Add may follow.
func (st *Staged) Finish() error {
	if st.b == nil {
		return st.s.fault.err() // an earlier flush was cut short by a fault
	}
	err := st.flush()
	if st.b != nil {
		st.b.Close()
		st.b = nil
	}
	return err
}

func (st *Staged) flush() error {
	if st.b.Empty() {
		return nil
	}
	b := st.b
	st.wrote = true
	err, finished := st.s.guard(func() error { return b.Commit(pebble.NoSync) })
	if !finished {
		st.b = nil // abandoned inside Pebble (fault.go)
		return fmt.Errorf("store: staging snapshot: %w", err)
	}
	if err != nil {
		return fmt.Errorf("store: staging snapshot: %w", err)
	}
	st.b.Close()
	st.b = st.s.db.NewBatch()
	return nil
}

// Discard deletes the staged data. It is a no-op once installed.
func (st *Staged) Discard() error {
	defer st.finishAccounting()
	if st.b != nil {
		st.b.Close()
		st.b = nil
	}
	if st.consumed || st.s.closed.Load() {
		return nil
	}
	st.consumed = true
	if !st.wrote {
		return nil // nothing of it reached Pebble
	}
	if !st.tooMany {
		keys := st.keys
		st.keys = nil
		err, _ := st.s.guard(func() error {
			b := st.s.db.NewBatch()
			defer b.Close()
			for len(keys) > 0 {
				n, w := binary.Uvarint(keys) // written by note: well formed
				if err := b.Delete(keys[w:w+int(n)], nil); err != nil {
					return err
				}
				keys = keys[w+int(n):]
			}
			return b.Commit(pebble.NoSync)
		})
		return err
	}
	err, _ := st.s.guard(func() error {
		return errors.Join(st.s.db.DeleteRange(leaseGenPrefix(st.gen), leaseGenEnd(st.gen), pebble.NoSync),
			st.s.db.DeleteRange(revGenPrefix(st.gen), revGenEnd(st.gen), pebble.NoSync))
	})
	return err
}
