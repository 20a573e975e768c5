// Package wal owns a Raft log on disk: the entries and the HardState, in
// a directory of preallocated, recycled segment files beside (not inside)
// the state store. It is written for one raft loop: appends and HardState
// changes are buffered and made durable together by one Sync (one write,
// one fdatasync), however many entries the batch holds.
//
// # What it offers
//
// Open replays the log and returns the HardState, the truncation point and
// the entries after it. Append adds entries, replacing the suffix from
// their first index on (as raft does when a new leader overwrites an
// uncommitted tail); SetHardState records a HardState; Sync makes both
// durable. Entries and Term read the log (terms from memory; entries from
// the files through an in-memory index of where each record lies).
// Compact drops the prefix up to an index and frees the segments that held
// only dropped entries; Reset empties the log at a snapshot's index and
// term. Both sync before freeing anything.
//
// # On disk
//
// The directory holds segment files named by a 16-hex-digit sequence
// number ("000000000000002a.wal"), spare files kept for reuse
// ("0000000000000007.spare") and a LOCK file. Each segment is
// Config.SegmentSize bytes (DefaultSegmentSize), filled with zeros when it
// is created, so that writing records into it never changes the file's
// size and fdatasync flushes data only. A freed segment is renamed to a
// spare; a new segment is a spare renamed (its old bytes stay) or, with
// no spare, a new zero-filled file. Whenever the log runs out of spares it
// zero-fills one in the background, so that rolling to the next segment
// rarely waits for that. Sequence numbers only grow and are never reused.
//
// A segment is a run of records, each at a multiple of 8 bytes:
//
//	crc     uint32  CRC-32C (Castagnoli) of the segment's first salt value
//	                (8 bytes) followed by the rest of the header and the
//	                payload; for the segment header, of those bytes only
//	length  uint32  payload bytes, at most MaxRecord
//	seq     uint64  the segment's sequence number
//	batch   uint64  the sync generation: +1 after every fdatasync
//	type    uint8   entry, HardState, compact, reset, segment header, end
//	zero    3 bytes
//	crc2    uint32  CRC-32C of the second salt value followed by the
//	                header and payload but for both checksums; zero for
//	                the segment header
//	payload         a marshaled raftpb.Entry or HardState; index and term;
//	                or (header) truncation point, previous segment, format
//	                marker, salt, HardState
//
// Every segment starts with a header record at offset 0 (the HardState
// and truncation point as of its start, so that older segments can be
// freed; the previous segment's number, so that a missing file is
// noticed; and the segment's salt) and, once the next segment is started,
// ends with an end record.
//
// The salt is two random 64-bit values (crypto/rand) drawn when the
// segment starts. It is written only in the header: never sent, logged or
// exposed. The header payload's format marker (a byte 0x01 where the
// format without salts had the HardState, whose marshaled bytes never
// start so) tells the two formats apart; a build that knows only the old
// one fails to unmarshal that HardState and refuses the segment.
// Segments of the old format are read as before (one checksum without a
// salt, crc2 zero) and are never written to again: Open starts a salted segment
// after them, and they go as compaction frees them.
//
// # Crash safety
//
// The argument rests on three rules the writer keeps:
//
//  1. A record counts only if it carries its segment's sequence number
//     and its checksums hold, and it is either the segment's header, at
//     offset 0, or another record after a header with a salt, its checksums
//     begun with that salt. A recycled file's old records carry an older
//     number, and zeros carry none, so neither is ever read as new. Nor
//     are bytes a client chose (see below).
//  2. Before the next segment gets any record, the current one is given
//     its end record, which names the next segment and its salt, and
//     synced. So every segment but the last is whole on
//     disk, and a bad record anywhere but in the last segment (or a
//     segment that lacks its end record and is not the last) is
//     corruption: Open fails with ErrCorrupt.
//  3. Records of generation g+1 are written only after the fdatasync that
//     closed generation g returned. So a valid record of generation g on
//     disk proves every record of generation g-1 or earlier was synced.
//  4. Within a segment generations never go down: a record of an older
//     generation than the record before it is not a record of the log.
//
// Rule 1 is what keeps client data out of the log. A client chooses the
// values of its writes, which land verbatim inside entry records, and it
// can predict sequence numbers and generations: so a value can hold bytes
// laid out as a valid record of a segment to come. Such bytes lie where
// replay looks for records: past a torn tail (scanned at every aligned
// offset, below), at the offset where the next record would have gone in
// a recycled spare, and past the tail of a segment Open went on in. Read
// as a record, they would inject an entry or a HardState, move the
// generation, or make Open refuse the log. But a segment's salt is drawn
// after everything a client wrote earlier (a spare's old bytes) and is
// never known to a client afterwards, so a forged record's two checksums
// both hold only by chance: 2^-64 for each forged record replay examines.
// It takes both: the scan past a torn tail (which every Open of a
// recycled file reaches, where the old bytes begin) examines every
// aligned offset, so a file full of forged records is millions of
// guesses, too many for one 32-bit checksum. The header is the one record
// checksummed without the salt (it carries it): it counts only at offset
// 0, where only the log writes (a recycled spare's offset 0 holds a
// header of an older number).
//
// Open reads the segments in order. In the last segment the first bad
// record ends the log unless a valid record at least two generations
// newer than the last good record (an end record counts) lies beyond it,
// in that segment or a trailing one: then the bad record was synced and
// damaged since, and Open fails with ErrCorrupt rather than drop synced
// data. A bad record followed only by records of its own or
// the next generation cannot be told from a torn write (they may all be
// unsynced), so it ends the log. A trailing segment with no valid record
// was started but never written; it is removed, unless its header is bad
// and the end record before it named its salt: then its records are
// checked by that salt, and one two generations past the end record
// proves the header was synced (it went out in the generation after the
// end record's), so the damage is ErrCorrupt. (An end record of the
// format before end records named the next segment leaves no salt to
// check by: a damaged header after one reads as a segment never written.)
//
// # Going on after a restart
//
// Open then goes on in the last segment, so that restarting takes no new
// segment file (a restart loop would otherwise fill the disk: segments are
// freed only by compaction). Past its tail (the first bad record) may lie
// zeros, torn bytes, a recycled file's records and leftovers: valid
// records of this segment written before the crash after a torn one, or
// left by an earlier restart. Open:
//
//  1. fdatasyncs the segment, so that what replay read (perhaps from the
//     page cache of a process that died) is durable before anything is
//     written after it;
//  2. takes for the next generation G one more than the newest of every
//     valid record in the file: those before the tail and every one at an
//     aligned offset past it (the scan that computes beyond);
//  3. writes a marker (the current HardState again, a no-op at replay) of
//     generation G at the tail, over the first bad bytes, and syncs it
//     before writing anything else. Every later record is of generation
//     G or newer.
//
// No leftover is ever read as a record: bytes this log did not write
// since then are unchanged, so every record in the file that is not one of
// the marker and those after it is older than G. A later scan reads the
// records before the tail, then the marker and what follows it in order,
// and the first leftover it meets is older than the record before it, so
// rule 4 ends the log there (a torn record may end it sooner). Zeros and a
// recycled file's records never decode (rule 1). By induction this holds
// over any number of restarts, each with its own leftovers.
//
// No synced record is lost, and damage is still told from a torn tail:
// the marker is synced before any newer record is written, so rule 3
// holds after it. G may be two generations past the last good record
// (when records of the next generation lay past a torn one); without a
// durable record of generation G at the tail, a torn first record after
// the restart followed by an intact one would look like damage to synced
// data. Until the marker is durable, a crash finds the file as Open found
// it but for the marker, torn or whole: past the tail, records at most
// one generation past the last good one (or Open would have refused the
// log), so a torn tail again.
//
// Each restart adds one marker record, so the segment files a restart
// loop leaves grow with the bytes written, not with the restarts. Open
// starts a new segment instead (ending the last one with an end record
// written over the torn bytes) when there is no segment yet, when the
// last one already has its end record (the crash came between a roll and
// the next segment's first record), when its file is not of the
// configured segment size, when it has no salt (the old format), or when
// the marker does not fit.
//
// Replay then rebuilds the state from the records in order: the last
// HardState; the highest truncation point (it only grows); no entry
// written before the latest Reset; and after it each entry replacing the
// one at its index and all after it. An entry that would leave a gap is
// ErrCorrupt. A segment is freed only when the compact or reset record
// that makes it unneeded is durable, and only from the oldest on, so
// replay never needs a freed record.
//
// New directories and file names are made durable (the parent directory
// is synced) before anything relies on them. A failed write or fdatasync
// makes the log refuse all further writes (ErrClosed): after a failed
// fdatasync the page cache may have dropped the data, so retrying could
// acknowledge what is not on disk.
//
// The crash tests check all this: after a simulated power cut, Open must
// succeed and replay exactly the synced records plus a prefix of the
// unsynced ones. crash_test.go cuts power on Pebble's crashable memory
// file system (what was synced survives, with a random subset of the
// unsynced 4 KiB blocks and directory entries); tornfs_test.go on one
// that keeps each unsynced write whole, torn at any byte or sector, or not
// at all, in any order. Both cut power also between a batch's write and
// its fdatasync, and both restart the log cleanly (often, right after a
// crash, after every operation) so that later crashes hit segments that
// several openings wrote in. continue_test.go builds the cases of going on
// after a restart one by one: a leftover right behind the marker or right
// behind a record written after it, a torn write after a restart, and a
// power cut during the restart that follows a process crash.
// forge_test.go places records a client could craft where replay looks
// (past a torn tail, in a recycled spare); unsalted_test.go opens a
// checked-in log of the old format and goes on from it.
package wal
