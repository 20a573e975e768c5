package raft

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kvd-project/kvd/internal/atomicfile"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft/peer"
)

// Restore. A backup is the applied key/value state at one index
// (internal/kv's View); a new cluster starts from one by having each of its initial
// members Restore it into an empty data directory before Open. Restore
// writes the state as an installed raft snapshot at the backup's index with
// the new members as voters, as etcdutl does, so the new cluster's log
// continues after that index and its writes get versions above every
// restored one. The cluster id comes from the new members and token
// (peer.ClusterIDFor), as for any new cluster: the restored cluster is a new
// cluster, and its nodes and the old ones refuse each other.

// Restore's refusals.
var (
	// ErrNotEmpty: Restore was given a data directory that holds something.
	ErrNotEmpty = errors.New("raft: data directory is not empty")
	// ErrSameCluster: the restored cluster would have the id of the cluster
	// the backup came from (the same token and members), so its nodes and
	// the old ones would not refuse each other.
	ErrSameCluster = errors.New("raft: restored cluster would have the backup's own cluster id")
	// ErrRestoreInterrupted: Open (or Restore) was given a data directory
	// a restore began to write and never finished (the process died). It
	// holds part of the backup, and no node state: started as it is, it
	// would make a new, empty cluster. Empty it and restore again.
	ErrRestoreInterrupted = errors.New("raft: a restore into this data directory was interrupted")
)

// restoreMarker is the file Restore creates, before anything else, in the
// directory it fills, and removes once the restore is complete and
// durable. Open refuses a directory that holds it.
const restoreMarker = "RESTORE-IN-PROGRESS"

// maxRestoreIndex (= backup.MaxIndex) bounds the index Restore starts a
// cluster at: half of maxPeerIndex, so that the restored cluster's log has
// room to grow. At maxPeerIndex itself the leader's first entry is past
// what every follower's filter takes (checkAppend), and the cluster never
// commits.
const maxRestoreIndex = maxPeerIndex / 2

// RestoreConfig configures Restore: the new cluster as its members are
// started (the same values their Config will have).
type RestoreConfig struct {
	ID                  uint64
	InitialCluster      map[uint64]string // the new cluster's initial members, this node included
	InitialClusterToken string
	DataDir             string // must be missing or empty
	Index               uint64 // the backup's applied index
	// Revision is the backup's store revision (backup.Header.Revision),
	// at least every key's Mod: the restored cluster goes on from it.
	Revision    uint64
	FromCluster uint64 // the id of the cluster the backup came from (0: unknown)
	// Backup is the backup's checksum (its trailer): the new cluster's id
	// depends on it (peer.RestoredClusterID), so members restored from
	// different backups refuse each other. Empty: the id is the token's
	// and members' alone.
	Backup []byte
	// Leases are the backup's TTL leases (ID and TTL; Keys is counted from
	// what fill attaches). Each starts at its full TTL when the new
	// cluster elects its leader, as after any leader change.
	Leases []store.Lease
	// RaftLog is where the node will keep its raft log (its
	// Config.RaftLog; "" the default): the directory is written in that
	// mode, since a directory in the "wal" mode cannot be opened in the
	// "pebble" one.
	RaftLog string
	// WALSegmentSize is the node's Knobs.WALSegmentSize.
	WALSegmentSize int64
	Logger         *slog.Logger
}

// Validate checks c.
func (c RestoreConfig) Validate() error {
	_, self := c.InitialCluster[c.ID]
	switch {
	case c.ID == 0 || !self:
		return fmt.Errorf("%w: restore: node %d must be one of the initial members", ErrConfig, c.ID)
	case c.DataDir == "":
		return fmt.Errorf("%w: restore: DataDir is required", ErrConfig)
	case c.Index == 0 || c.Index > maxRestoreIndex:
		return fmt.Errorf("%w: restore: backup index %d (1..%d)", ErrConfig, c.Index, uint64(maxRestoreIndex))
	case c.Revision > maxRestoreIndex:
		return fmt.Errorf("%w: restore: backup revision %d (0..%d)", ErrConfig, c.Revision, uint64(maxRestoreIndex))
	case store.ValidRaftLog(c.RaftLog) != nil:
		return fmt.Errorf("%w: restore: %w", ErrConfig, store.ValidRaftLog(c.RaftLog))
	case len(c.InitialClusterToken) > maxClusterToken:
		return fmt.Errorf("%w: restore: InitialClusterToken of %d bytes (at most %d)", ErrConfig, len(c.InitialClusterToken), maxClusterToken)
	}
	for id, addr := range c.InitialCluster {
		if id == 0 || addr == "" {
			return fmt.Errorf("%w: restore: peer %d has address %q", ErrConfig, id, addr)
		}
	}
	return nil
}

// Restore writes a new member's data directory from a backup: fill calls
// add for each of the backup's keys, in key order, with its value and
// revision metadata (Meta.Lease: 0, none, or one of cfg.Leases). The
// directory must be missing or empty (ErrNotEmpty otherwise:
// a restore never overwrites a node's data). On failure what Restore wrote
// is removed again. The node is then started with Open and the same
// ID, InitialCluster and InitialClusterToken.
func Restore(cfg RestoreConfig, fill func(add func(key, value []byte, m revision.Meta) error) error) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	base := peer.ClusterIDFor(cfg.InitialClusterToken, cfg.InitialCluster)
	id := peer.RestoredClusterID(base, cfg.Backup)
	if base == cfg.FromCluster || id == cfg.FromCluster {
		return fmt.Errorf("%w (%016x): give the new cluster its own --initial-cluster-token", ErrSameCluster, id)
	}
	if err := checkNotRestoring(cfg.DataDir); err != nil {
		return err
	}
	if ents, err := os.ReadDir(cfg.DataDir); err == nil && len(ents) > 0 {
		return fmt.Errorf("%w: %s holds %d entries: restore into a new directory (a node already restored restarts without the backup)", ErrNotEmpty, cfg.DataDir, len(ents))
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("raft: restore: %w", err)
	}
	if err := markRestoring(cfg.DataDir); err != nil {
		return fmt.Errorf("raft: restore: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st, err := store.Open(cfg.DataDir, store.Options{Logger: cfg.Logger, RaftLog: cfg.RaftLog, WALSegmentSize: cfg.WALSegmentSize})
	if err != nil {
		return fmt.Errorf("raft: restore: %w", err)
	}
	defer func() {
		if st != nil {
			if cerr := st.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("raft: restore: %w", cerr)
			}
		}
		if err != nil {
			removeContents(cfg.DataDir) // the marker last: a crash in between leaves it
		}
	}()
	if len(cfg.Backup) > 0 {
		if err := st.SetRestoredFrom(cfg.Backup); err != nil {
			return fmt.Errorf("raft: restore: record the backup: %w", err)
		}
	}
	if err := st.SetClusterID(id); err != nil {
		return fmt.Errorf("raft: restore: record cluster id: %w", err)
	}
	members := make([]store.Member, 0, len(cfg.InitialCluster))
	for pid, addr := range cfg.InitialCluster {
		members = append(members, store.Member{ID: pid, Addr: addr})
	}
	if err := st.Restore(cfg.Index, cfg.Revision, members, cfg.Leases, fill); err != nil {
		return fmt.Errorf("raft: restore: %w", err)
	}
	cerr := st.Close()
	st = nil // closed, failed or not: the deferred cleanup must not close it again
	if cerr != nil {
		return fmt.Errorf("raft: restore: %w", cerr)
	}
	if err := unmarkRestoring(cfg.DataDir); err != nil {
		return fmt.Errorf("raft: restore: %w", err)
	}
	cfg.Logger.Info("data directory restored from a backup", "dir", cfg.DataDir, "index", cfg.Index,
		"cluster_id", fmt.Sprintf("%016x", id))
	return nil
}

// removeContents empties dir, which Restore found empty or missing; the
// restore marker goes last.
func removeContents(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != restoreMarker {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(filepath.Join(dir, restoreMarker))
}

// markRestoring creates dir if need be and the restore marker in it,
// durably, before anything else is written there.
func markRestoring(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, restoreMarker), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}

// unmarkRestoring removes the marker of a restore that is complete (its
// store closed, so durable) and makes the removal durable.
func unmarkRestoring(dir string) error {
	if err := os.Remove(filepath.Join(dir, restoreMarker)); err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}

// checkNotRestoring refuses a directory an interrupted restore left.
func checkNotRestoring(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, restoreMarker)); err == nil {
		return fmt.Errorf("%w: %s holds part of a backup and no node state (%s): empty it and restore again",
			ErrRestoreInterrupted, dir, restoreMarker)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("raft: %w", err)
	}
	return nil
}
