package raft

import (
	"encoding/binary"
	"fmt"
)

var errBadCommand = fmt.Errorf("raft: malformed command")

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

// A member context rides in ConfChange.Context:
//
//	uvarint proposer | uvarint request id | address
//
// so that every node learns (and persists) the member's address, and the
// proposer finds its waiting caller.
type memberContext struct {
	proposer uint64
	reqID    uint64
	addr     string
}

func appendMemberContext(dst []byte, m memberContext) []byte {
	dst = binary.AppendUvarint(dst, m.proposer)
	dst = binary.AppendUvarint(dst, m.reqID)
	return append(dst, m.addr...)
}

func decodeMemberContext(b []byte) (memberContext, error) {
	var m memberContext
	var ok bool
	if len(b) == 0 {
		return m, nil
	}
	if m.proposer, b, ok = uvarint(b); !ok {
		return m, errBadCommand
	}
	if m.reqID, b, ok = uvarint(b); !ok {
		return m, errBadCommand
	}
	m.addr = string(b)
	return m, nil
}
