package pebbletune

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// DefaultMemTableSize is the default memtable size: Pebble's own (4 MiB).
// A 64 MiB memtable takes compaction off the PUT profile, but its
// WAL grows with it before rotating, and three nodes' WALs filled the RDMA
// VM's RAM-backed /tmp under 1 MiB values; raise it per node where disk and
// memory allow.
const DefaultMemTableSize = 4 << 20

// NoWALMemTableSize is the default memtable size of a store whose Pebble
// runs without its write-ahead log (the "wal" raft log mode): the WAL
// that grew with the memtable is gone. Flushes there come at most every
// other raft snapshot (the store asks for one when a log compaction has
// waited a snapshot for it), so a memtable beyond that size changes
// nothing: in BenchmarkPutCPU (internal/store) 16 MiB and 64 MiB both
// flushed a tenth fewer bytes and compacted a third fewer than 4 MiB,
// for about a tenth less CPU per PUT (rounds alternated with 4 MiB and
// with Pebble's WAL).
const NoWALMemTableSize = 16 << 20

// L0CompactionThreshold is how many L0 sublevels (read amplification)
// Pebble lets gather before it compacts L0 into the base level; its default
// is 4. Values are updated in place over a fixed key set and the log is
// truncated a few thousand entries behind, so every 4 MiB flush overlaps
// nearly all of the base level: at 4, each compaction rewrote the whole
// state for four flushes' worth of news, a third of a follower's CPU in
// the 64-instance PUT shape. At 16 the same rewrite carries
// four times as much: compaction CPU fell from 2.5 s to 0.9 s per 10 s
// on three nodes, server CPU per PUT by about a tenth. The cost is read
// amplification in Pebble, which serves only RPC reads of keys the
// region lacks, snapshots and log catch-up (the entry cache covers
// most); L0StopWritesThreshold keeps the debt bounded.
const L0CompactionThreshold = 16

// L0StopWritesThreshold is how many L0 sublevels stall writes until
// compaction catches up (Pebble's default is 12, which must stay above
// L0CompactionThreshold).
const L0StopWritesThreshold = 3 * L0CompactionThreshold

// BloomBitsPerKey sizes the Bloom filters of the levels that have them
// (BloomLevels): 10 bits per key (Pebble's and RocksDB's usual choice)
// make about 1% of the probes of a table that lacks the key read it.
// With L0CompactionThreshold sublevels gathered, a point read of a key
// the store lacks looks in every sublevel, each probe reading and
// decompressing an index and a data block: when writes read keys'
// metadata from Pebble, with 100,000 distinct keys, those reads were half
// of a node's CPU.
const BloomBitsPerKey = 10

// BloomLevels is how many levels, from L0 down, have Bloom filters: L0
// alone. A write reads nothing from Pebble (internal/store finds keys in
// its key index); what still probes for absent keys (reads of records by
// key: leases, metadata) probes up to L0CompactionThreshold
// L0 sublevels but one table per level below, so the filters pay on L0.
// Below it they were built at every compaction into the base level, which
// rewrites most of the state: without them, in rounds alternated with
// filters on every level on a shared machine (load 3 to 20, medians),
// BenchmarkPutCPU/wal spent 26.9 µs per PUT against 29.0 and the
// 64-instance PUT shape 178 against 186 µs of server CPU; SETs of new
// keys (redis-benchmark -r 50000) showed no difference beyond the noise.
const BloomLevels = 1

// Apply sets o's memtable (DefaultMemTableSize if memTable is 0), L0
// thresholds and filters to kvd's.
func Apply(o *pebble.Options, memTable uint64) {
	if memTable == 0 {
		memTable = DefaultMemTableSize
	}
	o.MemTableSize = memTable
	// Fewer, larger L0→base compactions (see the constants).
	o.L0CompactionThreshold = L0CompactionThreshold
	o.L0StopWritesThreshold = L0StopWritesThreshold
	for i := range min(BloomLevels, len(o.Levels)) {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(BloomBitsPerKey)
	}
}
