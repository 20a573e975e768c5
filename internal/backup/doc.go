// Package backup is the file format of a kvd backup: the applied key-value
// state of a cluster at one Raft index, as `kvctl snapshot save` writes it
// and `kvd --restore` reads it. The server streams exactly these bytes
// (OpSnapshot), so the client writes what it receives and checks it.
//
//	file    = header lease* record* trailer
//	header  = magic "KVDSNAP\n" (8 bytes) | format u16 (2) | reserved u16 (0)
//	          | index u64 | keys u64 | cluster u64 | leases u64
//	          | revision u64 | compacted u64                        (60 bytes)
//	lease   = id u64 | ttl u64 (nanoseconds)                       (16 bytes)
//	record  = keyLen u16 | valueLen u32 | meta (32 bytes) | key | value
//	meta    = create u64 | mod u64 | version u64 | lease u64   (revision.Meta)
//	trailer = SHA-256 of every byte before it                      (32 bytes)
//
// Older formats, which the reader still reads: format 2
// (FormatNoRevisions, written by kvd before keys had revisions) has no
// revision and compacted fields (a 44-byte header) and, for meta, version
// u64 | lease u64, the version being the index of the entry that last
// wrote the key; format 1 (FormatNoLeases, before backups carried TTL
// leases) has no leases field either (36 bytes), no lease entries and no
// lease in the records. A key of theirs reads as created and last modified
// at its version, once (Meta{Create: version, Mod: version, Version: 1}),
// and their revision is their index. A reader that knows only the older
// formats refuses a newer file by its version rather than misreading it.
//
// All integers are little-endian. index is the applied Raft index the state
// was read at, 1..MaxIndex (2^61, half the largest index kvd's peers may
// name, so that a restored cluster's log has room to grow); keys is the number of records; cluster is the id of the
// cluster it came from (a restore refuses to make a cluster with that id
// again: the new cluster must be told apart from the old). Records are in strictly
// increasing key order (a key at most once), with 1 <= keyLen <=
// limits.MaxKey, valueLen <= limits.MaxValue, 1 <= create <= mod <=
// revision and 1 <= version <= mod-create+1 (one write per revision at
// most). revision is the store revision of the state (at most MaxIndex),
// compacted its compaction revision (0: none; at most revision). Leases are in
// strictly increasing id order, at most limits.MaxLeases of them, with id
// != 0 and limits.MinLeaseTTL <= ttl <= limits.MaxLeaseTTL (the TTL as
// granted: a lease's deadline is not state, and a restored lease starts
// again at its full TTL). A record's lease is 0 (none) or the id of one of
// the file's leases, and a lease is named by at most limits.MaxLeaseKeys
// records.
//
// A file is accepted only whole: the reader checks every bound as it goes,
// the checksum at the end, and that nothing follows the trailer but, in a
// backup saved through etcd's API, etcd's snapshot framing (etcd.go); a
// truncated file fails with ErrTruncated, a damaged one with ErrChecksum
// or ErrFormat. Restoring callers must not act on records before the
// reader's final io.EOF (or use Verify first).
package backup
