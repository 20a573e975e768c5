package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/revision"
	kvstore "github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft"
)

// restore initialises the node's empty data directory from the backup
// file Config.Restore names, before the node opens it (start), so the node
// starts as a member of a new cluster whose state is the backup's. The
// file is read twice: once whole to check it (a damaged or truncated file
// is refused before anything is written), then to write it. Every initial
// member of the new cluster restores the same file.
func (s *Server) restore() error {
	path := s.cfg.Restore
	h, sum, err := verifyBackup(path)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("server: restore: %w", err)
	}
	defer f.Close()
	r, err := backup.NewReader(f)
	if err != nil {
		return fmt.Errorf("server: restore %s: %w", path, err)
	}
	// The file is opened again: it must still be the one checked (a backup
	// job may have renamed a newer one over it), or its records would go in
	// under the checked header's index.
	errChanged := fmt.Errorf("server: restore %s: %w: the file changed since it was checked (sha256 %x); restore from a file nothing writes to",
		path, backup.ErrChecksum, sum)
	if r.Header() != h {
		return errChanged
	}
	err = raft.Restore(raft.RestoreConfig{
		ID: s.cfg.ID, InitialCluster: s.cfg.InitialCluster, InitialClusterToken: s.cfg.InitialClusterToken,
		DataDir: s.cfg.DataDir, Index: h.Index, Revision: h.Revision, FromCluster: h.Cluster, Backup: sum, Logger: s.log,
		Leases: restoredLeases(r.Leases()), RaftLog: s.cfg.RaftLog, WALSegmentSize: s.cfg.Knobs.WALSegmentSize,
	}, func(add func(key, value []byte, m revision.Meta) error) error {
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				if !bytes.Equal(r.Sum(), sum) {
					return errChanged
				}
				return nil // the trailer checked out again, the same as before
			}
			if err != nil {
				return err
			}
			if err := add(rec.Key, rec.Value, rec.Meta); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return fmt.Errorf("server: restore %s: %w", path, err)
	}
	s.log.Info("restored a backup; this node starts a new cluster with its state",
		"file", path, "index", h.Index, "revision", h.Revision, "keys", h.Keys, "leases", h.Leases, "format", h.Format,
		"sha256", fmt.Sprintf("%x", sum))
	return nil
}

// restoredLeases are a backup's leases as the store keeps them; their key
// counts are made from the records, and each starts at its full TTL when
// the new cluster elects a leader.
func restoredLeases(ls []backup.Lease) []kvstore.Lease {
	out := make([]kvstore.Lease, 0, len(ls))
	for _, l := range ls {
		out = append(out, kvstore.Lease{ID: l.ID, TTL: uint64(l.TTL)})
	}
	return out
}

func verifyBackup(path string) (backup.Header, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return backup.Header{}, nil, fmt.Errorf("server: restore: %w", err)
	}
	defer f.Close()
	h, sum, err := backup.Verify(f)
	if err != nil {
		return h, nil, fmt.Errorf("server: restore %s: %w", path, err)
	}
	return h, sum, nil
}
