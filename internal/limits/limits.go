package limits

import (
	"encoding/binary"
	"time"
)

// Keys and values. They match the table layout (docs/layout.md): a record
// holds a key of up to MaxKey bytes and a value of up to MaxValue bytes.
const (
	// MaxKey is the longest key, in bytes. Keys are at least 1 byte.
	MaxKey = 1024
	// MaxValue is the longest value, in bytes.
	MaxValue = 1 << 20
)

// Transactions. A transaction is one Raft entry and one message each way,
// so it is bounded like the largest PUT.
const (
	// MaxTxnOps is etcd's --max-txn-ops default, counted as etcd counts
	// it: the longest of a transaction's compares, Then and Else may hold
	// at most MaxTxnOps entries, and a nested transaction's lists at most
	// what the longest list of its parent leaves (so nesting is bounded).
	MaxTxnOps = 128
	// MaxTxnCompares is the most compares a transaction may have: the
	// same count as etcd's.
	MaxTxnCompares = MaxTxnOps
	// MaxTxnBytes bounds a transaction's encoding: enough for a
	// conditional PUT of the largest value under the longest key (the
	// compare repeats the key), with room for the framing, and no more, so
	// that a transaction command stays within the Raft and transport
	// message limits sized for a PUT.
	MaxTxnBytes = MaxValue + 4*MaxKey
	// MaxTxnReadBytes bounds the keys and values that the reads of the
	// branch that runs (GETs, ranges, prev_kv, nested transactions
	// included) return together, so that a reply is about a GET's size.
	MaxTxnReadBytes = MaxValue
	// MaxTxnResponseBytes bounds a transaction's reply whole: what it
	// reads plus the framing and metadata of every result and key (38
	// bytes each); a transaction over it fails whole, applying nothing.
	MaxTxnResponseBytes = MaxTxnReadBytes + 256<<10
)

// Batches of PUTs (OpPutBatch: several independent PUTs in one request
// and one Raft entry, each applied as its own write at its own
// revision). A batch is encoded as a transaction's Then list, so it is
// bounded like one: at most MaxBatchPuts PUTs and MaxBatchBytes encoded,
// which keeps its Raft entry within MaxCommand.
const (
	// MaxBatchPuts is the most PUTs one batch holds.
	MaxBatchPuts = MaxTxnOps
	// MaxBatchBytes bounds a batch's encoding.
	MaxBatchBytes = MaxTxnBytes
)

// TTL leases. They are checked when entries are applied.
const (
	// MaxLeases is the most leases that may exist at once.
	MaxLeases = 10000
	// MaxLeaseKeys is the most keys one lease may hold. It bounds the keys
	// one revoke (or expiry) deletes in its single entry.
	MaxLeaseKeys = 1000
	// MinLeaseTTL and MaxLeaseTTL bound a lease's TTL.
	MinLeaseTTL = time.Second
	MaxLeaseTTL = 365 * 24 * time.Hour
	// MaxLeaseListIDs is the most lease ids one lease list reply holds
	// (8 bytes each); a client asks for the following pages itself.
	MaxLeaseListIDs = 1000
)

// Reads of many keys: each answer travels in one message.
const (
	// MaxScanKeys is the most keys one scan page holds.
	MaxScanKeys = 1000
	// MaxScanBytes bounds a scan page's keys and values; a page always
	// holds at least one entry when one remains.
	MaxScanBytes = 2 << 20
	// MaxSortKeys is the most keys a range read sorted by anything but
	// the key (version, create, mod, value) may match: such a read holds
	// every matching key in memory to sort them; one over it is refused.
	// Key order needs no such bound (it pages statelessly).
	MaxSortKeys = 100000
	// MaxSortBytes bounds the keys (and, sorted by value or read with
	// values, the values) such a read holds in memory; one over it is
	// refused.
	MaxSortBytes = 64 << 20
	// MaxGetManyKeys is the most keys one get-many request names.
	MaxGetManyKeys = 1024
	// MaxGetManyBytes bounds the values one get-many answer holds.
	MaxGetManyBytes = 2 << 20
)

// Watches: the bounds of one watch message.
const (
	// MaxWatchEvents is the most events one watch message carries.
	MaxWatchEvents = 1000
	// MaxWatchBytes bounds one watch message's events.
	MaxWatchBytes = 1 << 20
)

// MaxCommand bounds the data of one state-machine entry: a command's
// header (op, proposer, request id, key length) and a PUT's key and
// value, or a transaction. Peer connections must carry an append of one
// such entry.
const MaxCommand = 1 + 3*binary.MaxVarintLen64 + max(MaxKey+MaxValue, MaxTxnBytes)

// Range deletes: one applies in one Raft entry and one Pebble batch.
const (
	// MaxDeleteRangeKeys is the most keys one range delete deletes; one
	// over it is refused whole when applied (delete the range in parts).
	MaxDeleteRangeKeys = 100000
	// MaxDeleteRangePrevBytes bounds the keys and values a range delete
	// with prev_kv returns (one message); one over it is refused whole.
	MaxDeleteRangePrevBytes = 2 << 20
)

// History: the store's record of past values (internal/store).
const (
	// CompactBatch is the most history records one batch of physical
	// compaction deletes (it looks at up to 64 times as many keys). The deletion
	// runs beside the apply path in batches of this size, so a
	// compaction of any length never holds the apply path for more than
	// one such batch (a snapshot install waits for the batch in flight).
	CompactBatch = 1000
)
