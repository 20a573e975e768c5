package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/revision"
)

// ErrNotEmpty: a restore was asked of a store that already holds a state.
var ErrNotEmpty = errors.New("store: not empty")

// RestoreTerm is the term of the snapshot a restored store starts from.
// The new cluster's terms have nothing to do with the old one's.
const RestoreTerm = 1

// Restore makes an empty store the first member state of a new cluster
// bootstrapped from a backup, the way a follower installs a leader's
// snapshot: leases are the backup's leases (their TTLs; their key counts
// are what fill attaches), fill adds the backup's keys with their
// revision metadata (Meta.Lease: 0, none, or one of leases) under a fresh
// generation, and one synced batch installs a raft snapshot at (index,
// RestoreTerm) whose configuration makes members the voters, with the
// HardState committed up to index. The log then starts at index+1. rev is
// the backup's store revision, at least every key's Mod: the restored
// store goes on from it, and holds no history before it. Raft sees a
// restarted node, not a fresh one, and does not bootstrap.
func (s *Store) Restore(index, rev uint64, members []Member, leases []Lease,
	fill func(add func(key, value []byte, m revision.Meta) error) error) error {
	s.mu.Lock()
	empty := s.applied == 0 && s.last == 0 && s.hs.GetTerm() == 0 && s.hs.GetCommit() == 0
	s.mu.Unlock()
	if !empty {
		return fmt.Errorf("%w: restore needs an empty store", ErrNotEmpty)
	}
	if index == 0 {
		return fmt.Errorf("%w: restore at index 0", ErrBadSnapshot)
	}
	st := s.NewStaged(index, RestoreTerm)
	err := restoreFill(st, rev, leases, fill)
	if err == nil {
		err = st.Finish()
	}
	if err != nil {
		st.Discard()
		return err
	}
	voters := make([]uint64, 0, len(members))
	for _, m := range members {
		voters = append(voters, m.ID)
	}
	slices.Sort(voters)
	snap := &pb.Snapshot{
		Data: EncodeMembers(members),
		Metadata: &pb.SnapshotMetadata{
			ConfState: &pb.ConfState{Voters: voters},
			Index:     proto.Uint64(index),
			Term:      proto.Uint64(RestoreTerm),
		},
	}
	u := s.NewUpdate()
	if err := u.InstallSnapshot(snap, st); err != nil {
		u.Close()
		st.Discard()
		return err
	}
	if err := u.SetHardState(&pb.HardState{Term: proto.Uint64(RestoreTerm), Commit: proto.Uint64(index)}); err != nil {
		u.Close()
		return err
	}
	if err := restoreRevisions(u, rev); err != nil {
		u.Close()
		return err
	}
	if err := u.Commit(true); err != nil {
		return err
	}
	return s.ensureSnapshot()
}

// restoreFill stages the keys fill adds, their lease attachments, and
// then the leases with the keys counted.
func restoreFill(st *Staged, rev uint64, leases []Lease, fill func(add func(key, value []byte, m revision.Meta) error) error) error {
	keys := make(map[uint64]uint64, len(leases))
	for _, l := range leases {
		keys[l.ID] = 0
	}
	var lk []byte
	h := restoredHistory{seq: map[uint64]uint32{}}
	err := fill(func(key, value []byte, m revision.Meta) error {
		if m.Mod > rev {
			return fmt.Errorf("%w: key %q modified at revision %d, after the backup's %d", ErrBadSnapshot, key, m.Mod, rev)
		}
		if err := h.add(st, key, value, m); err != nil {
			return err
		}
		lease := m.Lease
		if lease == 0 {
			return nil
		}
		n, ok := keys[lease]
		if !ok {
			return fmt.Errorf("%w: key %q attached to lease %d, which the backup lacks", ErrBadSnapshot, key, lease)
		}
		keys[lease] = n + 1
		// Staged records are the keys after the generation header.
		lk = leaseKey(lk[:0], 0, leaseAtt, lease, key)
		if err := st.AddLease(lk[leaseKeyHeader:], nil); err != nil {
			return err
		}
		lk = leaseKey(lk[:0], 0, leaseOfKy, 0, key)
		return st.AddLease(lk[leaseKeyHeader:], binary.LittleEndian.AppendUint64(nil, lease))
	})
	if err != nil {
		return err
	}
	for _, l := range leases {
		l.Keys = keys[l.ID]
		lk = leaseKey(lk[:0], 0, leaseRec, l.ID, nil)
		if err := st.AddLease(lk[leaseKeyHeader:], encodeLease(l)); err != nil {
			return err
		}
	}
	return nil
}

// restoredHistory stages a restored key's one history record, at its Mod:
// what a read at the backup's revision needs.
type restoredHistory struct {
	seq      map[uint64]uint32 // per revision, the keys recorded at it
	key, val []byte
}

func (h *restoredHistory) add(st *Staged, key, value []byte, m revision.Meta) error {
	seq := h.seq[m.Mod]
	h.seq[m.Mod] = seq + 1
	h.key = appendOrderKey(h.key[:0], 0, m.Mod, seq, key)
	h.val = appendHistValue(h.val[:0], m, value, false)
	return st.Add(h.key[revKeyHeader+1:], h.val)
}

// restoreRevisions makes the restored state the one at the backup's
// revision rev, with the history compacted there: it holds each key's
// last write only, so a read below rev (or a watch from rev or before)
// would miss the writes it overwrote, and fails as compacted instead.
func restoreRevisions(u *Update, rev uint64) error {
	if rev == 0 {
		return nil // an empty backup: a store that never changed
	}
	if err := u.SetRevision(rev); err != nil {
		return err
	}
	return u.Compact(rev)
}
