package store

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// ClusterID is the id of the cluster this store belongs to, 0 if none was
// recorded yet (a node that joins learns it from the cluster). It may be
// called from any goroutine.
func (s *Store) ClusterID() uint64 {
	return s.cluster.Load()
}

// SetClusterID records id as the store's cluster, durably (synced) before it
// returns. A store belongs to one cluster for life: recording an id other
// than the one already recorded fails with ErrClusterID, and recording the
// same one again does nothing. It may be called from any goroutine; the
// write is a key of its own, outside the raft loop's batches.
func (s *Store) SetClusterID(id uint64) error {
	if id == 0 {
		return fmt.Errorf("%w: cluster id 0", ErrClusterID)
	}
	s.clusterMu.Lock()
	defer s.clusterMu.Unlock()
	switch cur := s.cluster.Load(); cur {
	case id:
		return nil
	case 0:
	default:
		return fmt.Errorf("%w: the store belongs to cluster %016x, not %016x", ErrClusterID, cur, id)
	}
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.setSynced(keyClusterID, encodeU64(id)); err != nil {
		return err
	}
	s.cluster.Store(id)
	return nil
}

// NodeID is the member id this store was first opened as (SetNodeID), 0 if
// none was recorded (a new store, or one from before ids were recorded).
func (s *Store) NodeID() (uint64, error) {
	raw, ok, err := s.getRaw(keyNodeID)
	if err != nil || !ok {
		return 0, err
	}
	return decodeU64(raw)
}

// SetNodeID records id as the member this store belongs to, durably. The
// caller checks NodeID first: a store is one member's for life.
func (s *Store) SetNodeID(id uint64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.setSynced(keyNodeID, encodeU64(id))
}

// Member returns id's entry in the address book as of Applied.
func (s *Store) Member(id uint64) (Member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.members[id]
	return m, ok && !m.Removed
}

// Removed reports whether id was a member and was removed, as of Applied:
// it may never be added again (Member.Removed).
func (s *Store) Removed(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members[id].Removed
}

// NumMembers is the size of the address book as of Applied: 0 until the
// node applied its first configuration (a new node, before bootstrapping or
// being sent the log).
func (s *Store) NumMembers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.members {
		if !m.Removed {
			n++
		}
	}
	return n
}

// SetRestoredFrom records, durably, the checksum of the backup a restore
// filled this store from (raft.Restore): the cluster id of a restored
// cluster depends on it, so members restored from different backups refuse
// each other instead of mixing two states.
func (s *Store) SetRestoredFrom(sum []byte) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.setSynced(keyRestored, sum)
}

// setSynced writes one metadata key, durably (commitDurable), outside the
// raft loop's batches, through the fault guard like every other store
// write: a disk that fails here must not hang the caller (or Close) in
// Pebble.
func (s *Store) setSynced(key, value []byte) error {
	b := s.db.NewBatch()
	if err := b.Set(key, value, nil); err != nil {
		b.Close()
		return err
	}
	return s.commitSynced(b)
}

// commitSynced commits b durably (commitDurable) under the fault guard,
// and closes it unless the commit was abandoned inside Pebble.
func (s *Store) commitSynced(b *pebble.Batch) error {
	err, finished := s.guard(func() error { return s.commitDurable(b) })
	if finished {
		b.Close()
	}
	return err
}

// RestoredFrom is the checksum SetRestoredFrom recorded (nil: the store was
// not restored from a backup).
func (s *Store) RestoredFrom() ([]byte, error) {
	raw, _, err := s.getRaw(keyRestored)
	return raw, err
}

// RemovedBy is the member that told this node it was removed from the
// cluster (SetRemovedBy), ok false if none did. A node that applied its
// own removal has its tombstone (Removed) instead; either way it never
// serves again.
func (s *Store) RemovedBy() (by uint64, ok bool, err error) {
	raw, ok, err := s.getRaw(keyRemoved)
	if err != nil || !ok {
		return 0, false, err
	}
	by, err = decodeU64(raw)
	return by, err == nil, err
}

// SetRemovedBy records, durably, that member by told this node it was
// removed from the cluster: a node removed while it was cut off never
// applies its own removal, and must still refuse to start again.
func (s *Store) SetRemovedBy(by uint64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.setSynced(keyRemoved, encodeU64(by))
}

// DiskSize is the bytes the database takes on disk, as Pebble counts them
// (its sstables, write-ahead log and other files).
func (s *Store) DiskSize() uint64 { return s.db.Metrics().DiskSpaceUsage() }
