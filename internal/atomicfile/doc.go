// Package atomicfile replaces a file so that a crash leaves either the old
// file or the whole new one, never part of it, and so that a replacement
// that was reported done survives a power loss: the data is written to a
// temporary file in the same directory and synced, renamed over the target,
// and then the directory is synced so the rename itself is on disk.
//
// Without the last step a rename can be lost in a crash on ext4, XFS and
// others: the new name lives only in the directory's page cache until the
// directory is flushed, and a backup that `kvctl snapshot save` reported
// saved would then be gone, or be the older one.
package atomicfile
