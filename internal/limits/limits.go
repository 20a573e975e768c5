package limits

import "encoding/binary"

// Key and value limits, matching the table layout (docs/layout.md).
const (
	MaxKeyLen   = 1024
	MaxValueLen = 1 << 20
)

// MaxTxnBytes bounds a transaction's encoding: enough for a conditional
// PUT of the largest value under the longest key (internal/txn.MaxBytes).
const MaxTxnBytes = MaxValueLen + 4*MaxKeyLen

// MaxCommand bounds the data of one state-machine entry: a command's
// header (op, proposer, request id, key length) and a PUT's key and
// value, or a transaction. Peer connections must carry an append of one
// such entry.
const MaxCommand = 1 + 3*binary.MaxVarintLen64 + max(MaxKeyLen+MaxValueLen, MaxTxnBytes)
