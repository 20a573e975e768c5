package kv

import (
	"encoding/binary"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft"
)

// A command is the Data of a normal raft entry:
//
//	op (1 byte) | uvarint proposer | uvarint request id | uvarint len(key) | key | value
//
// The proposer and request id let the proposing node find the caller
// waiting for the entry; every node applies the op the same way. A txn
// command (opTxn, also compare-and-swap) has no key, and its value is the
// transaction in internal/txn's encoding, evaluated at apply (txn.go).
// Ops are appended, never renumbered, so every entry ever written still
// decodes to what it meant. Request ids
// start from a random value at each Open, so an entry proposed by an earlier
// incarnation of the node cannot complete a new caller's request.
type command struct {
	op       byte
	proposer uint64
	reqID    uint64
	key      []byte
	value    []byte
}

const (
	opPut    byte = 1
	opDelete byte = 2
	opTxn    byte = 3
	// TTL leases (leasecmd.go); no key. 6 and 7 are reserved for them.
	opLeaseGrant  byte = 4
	opLeaseRevoke byte = 5
	// opCompact compacts the stored history (compact.go); no key.
	opCompact byte = 8
	// opDeleteRange deletes a range of keys (deleterange.go).
	opDeleteRange byte = 9
	// opPutPrev is opPut whose proposer is told the key's previous value
	// (etcd's prev_kv).
	opPutPrev byte = 10
	// opPutBatch is a batch of independent PUTs (batch.go); no key. A
	// member of a data format before it (store.DataFormatPutBatch) would
	// skip it: the peer hello keeps such members apart.
	opPutBatch byte = 11
)

var errBadCommand = fmt.Errorf("raft: malformed command")

func appendCommand(dst []byte, c command) []byte {
	dst = append(dst, c.op)
	dst = binary.AppendUvarint(dst, c.proposer)
	dst = binary.AppendUvarint(dst, c.reqID)
	dst = binary.AppendUvarint(dst, uint64(len(c.key)))
	dst = append(dst, c.key...)
	return append(dst, c.value...)
}

func commandSize(c command) int {
	return 1 + 3*binary.MaxVarintLen64 + len(c.key) + len(c.value)
}

// maxCommandSize bounds commandSize for every valid command: a PUT's key
// and value, or a transaction (txn.MaxBytes, which holds a conditional PUT
// of the largest value under the longest key).
const maxCommandSize = 1 + 3*binary.MaxVarintLen64 + max(limits.MaxKey+limits.MaxValue, txn.MaxBytes)

// The raft node provisions its peer connections for limits.MaxCommand:
// these fail to compile unless it is this codec's bound.
const (
	_ = uint(maxCommandSize - limits.MaxCommand)
	_ = uint(limits.MaxCommand - maxCommandSize)
)

// decodeCommand parses data; key and value alias it.
func decodeCommand(data []byte) (command, error) {
	var c command
	if len(data) < 1 {
		return c, errBadCommand
	}
	c.op, data = data[0], data[1:]
	if (c.op < opPut || c.op > opLeaseRevoke) && (c.op < opCompact || c.op > opPutBatch) {
		return c, fmt.Errorf("%w: op %d", errBadCommand, c.op)
	}
	var ok bool
	if c.proposer, data, ok = uvarint(data); !ok {
		return c, errBadCommand
	}
	if c.reqID, data, ok = uvarint(data); !ok {
		return c, errBadCommand
	}
	n, data, ok := uvarint(data)
	if !ok || n > uint64(len(data)) {
		return c, errBadCommand
	}
	c.key, c.value = data[:n:n], data[n:]
	return c, nil
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

// encoder is c as the raft node proposes it: with this node as its
// proposer and the request id the node gives it.
func (c command) encoder() raft.Encode {
	return func(proposer, reqID uint64) []byte {
		c.proposer, c.reqID = proposer, reqID
		return appendCommand(make([]byte, 0, commandSize(c)), c)
	}
}
