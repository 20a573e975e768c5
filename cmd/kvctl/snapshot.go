package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/atomicfile"
	"github.com/kvd-project/kvd/internal/backup"
)

const snapshotUsage = "snapshot save FILE | status FILE"

// runSnapshot is `kvctl snapshot save FILE` (a backup from the leader) and
// `kvctl snapshot status FILE` (check a backup and describe it).
func runSnapshot(ctx context.Context, e *env, args []string) error {
	if len(args) != 2 {
		return usageError{"usage: kvctl " + snapshotUsage}
	}
	switch args[0] {
	case "save":
		return snapshotSave(ctx, e, args[1])
	case "status":
		return snapshotStatus(e, args[1])
	}
	return usageError{"usage: kvctl " + snapshotUsage}
}

// snapshotSave writes the backup to a temporary file next to path and
// renames it into place only once it is whole, checked and synced, then
// syncs the directory: path never holds a partial backup, and a backup
// reported saved survives a crash.
func snapshotSave(ctx context.Context, e *env, path string) error {
	var info client.SnapshotInfo
	err := atomicfile.Write(path, func(f *os.File) (err error) {
		info, err = e.c.Snapshot(ctx, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	return e.printSnapshot("saved", path, info)
}

func snapshotStatus(e *env, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h, sum, err := backup.Verify(f)
	if err != nil {
		return fmt.Errorf("snapshot status %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return e.printSnapshot("ok", path, client.SnapshotInfo{Index: h.Index, Revision: h.Revision, Compacted: h.Compacted,
		Keys: h.Keys, Leases: h.Leases, Bytes: st.Size(), SHA256: sum})
}

func (e *env) printSnapshot(what, path string, info client.SnapshotInfo) error {
	if e.o.write == "json" {
		return e.json(map[string]any{"file": path, "index": info.Index, "revision": info.Revision, "compact_revision": info.Compacted,
			"keys": info.Keys, "leases": info.Leases, "bytes": info.Bytes, "sha256": fmt.Sprintf("%x", info.SHA256), "node": info.Node})
	}
	fmt.Fprintf(e.out, "%s %s: index %d, revision %d, compact revision %d, %d keys, %d leases, %d bytes, sha256 %x\n",
		what, path, info.Index, info.Revision, info.Compacted, info.Keys, info.Leases, info.Bytes, info.SHA256)
	return nil
}
