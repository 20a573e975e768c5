package store

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// commitWAL writes the Update in the "wal" mode (see raftlog.go for the
// rules it keeps):
//
//   - a snapshot install goes to Pebble first, durably (commitDurable:
//     synced, or flushed), and then resets the log to the snapshot's index
//     (rule 3);
//   - the log's appends and HardState are written, and synced when sync
//     asks for it, or when the Update applies entries beyond the log's
//     durable end (rule 1);
//   - then the state machine's writes and the applied index go to Pebble,
//     unsynced: their durability comes from the log, replayed at Open
//     from the applied index Pebble last persisted.
//
// With syncLater (CommitNoSyncWait), when every entry the Update applies
// was durable in the log before it, the log's sync is left to SyncWait and
// the Update's effects are published before it.
func (u *Update) commitWAL(sync, syncLater bool) error {
	s := u.s
	if u.b.Empty() && len(u.appends) == 0 && u.hs == nil {
		u.synced = true
		return nil
	}
	early := syncLater && !u.reset && u.applied <= s.walDurable.Load()
	mustSync := (sync || u.reset || u.applied > s.walDurable.Load()) && !early
	u.synced = !early
	b := u.b
	return u.commitGuarded(func() error {
		if u.reset {
			if err := s.commitDurable(b); err != nil {
				return err
			}
			if err := s.wal.Reset(u.trunc.index, u.trunc.term); err != nil {
				return err
			}
			s.walPending = s.walPending[:0] // the reset dropped what they would
		}
		for _, ents := range u.appends {
			if err := s.wal.Append(ents); err != nil {
				return err
			}
		}
		// A HardState that needs no sync (a new commit index alone) is
		// left to the next synced one: nothing stays buffered in the log
		// after Commit, so reading it (Entries) never writes outside the
		// fault guard. Open raises a commit index left behind (rule 1).
		if u.hs != nil && (mustSync || early) {
			if err := s.wal.SetHardState(u.hs); err != nil {
				return err
			}
		}
		if mustSync {
			if err := s.syncWAL(); err != nil {
				return err
			}
		}
		if u.reset || b.Empty() {
			return nil
		}
		return b.Commit(pebble.NoSync)
	})
}

// syncWAL syncs the log and notes how far it is durable.
func (s *Store) syncWAL() error {
	if err := s.wal.Sync(); err != nil {
		return err
	}
	s.walDurable.Store(s.wal.LastIndex())
	return nil
}

// syncWaitWAL is SyncWait in the "wal" mode.
func (u *Update) syncWaitWAL() error {
	if u.synced {
		return nil
	}
	u.synced = true
	err, _ := u.s.guard(u.s.syncWAL)
	if err != nil {
		return fmt.Errorf("store: sync: %w", err)
	}
	return nil
}
