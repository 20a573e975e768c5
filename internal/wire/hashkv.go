package wire

import (
	"encoding/binary"
	"errors"
)

// HashKV is the answer to OpHashKV:
//
//	hash-kv response = hash:u32 compactRevision:u64 hashRevision:u64
//
// Hash is a CRC-32C of every key live at HashRevision, in key order, with
// its value and revision.Meta (see server/hashkv.go); CompactRevision is
// the node's compaction revision when it hashed.
type HashKV struct {
	Hash            uint32
	CompactRevision uint64
	HashRevision    uint64
}

// hashKVLen is an encoded HashKV's size.
const hashKVLen = 4 + 8 + 8

// ErrHashKV: a hash-kv response does not decode.
var ErrHashKV = errors.New("wire: malformed hash-kv response")

// AppendHashKV appends h's encoding.
func AppendHashKV(b []byte, h HashKV) []byte {
	b = binary.LittleEndian.AppendUint32(b, h.Hash)
	b = binary.LittleEndian.AppendUint64(b, h.CompactRevision)
	return binary.LittleEndian.AppendUint64(b, h.HashRevision)
}

// DecodeHashKV decodes a HashKV.
func DecodeHashKV(b []byte) (HashKV, error) {
	if len(b) != hashKVLen {
		return HashKV{}, ErrHashKV
	}
	return HashKV{Hash: binary.LittleEndian.Uint32(b), CompactRevision: binary.LittleEndian.Uint64(b[4:]),
		HashRevision: binary.LittleEndian.Uint64(b[12:])}, nil
}
