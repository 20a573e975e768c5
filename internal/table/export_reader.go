package table

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/kvd-project/kvd/internal/revision"
)

// Helpers for readers' tests (client): they place inline records by hand,
// in states and at moments the writer never makes on its own (a block
// rewritten while a READ runs, a word naming bytes past its arena). Not for
// writing a live table: nothing here takes the table's lock or keeps its
// allocator's books.

// WriteInlineRecord writes the layout 4 tagged inline record for key,
// value and meta into block (exactly InlineLen(len(key), len(value)) bytes, at an
// 8-aligned place in an arena) in state 0 (live), 1 (dead) or 2 (hidden),
// under a tag chosen by rule T, and returns the tag for the slot word.
func WriteInlineRecord(block, key, value []byte, meta revision.Meta, state uint32) uint8 {
	tag, _ := stores{}.writeInline(block, nil, key, value, meta, state)
	return tag
}

// SetInlineRecordState changes the state of the inline record in block as
// the writer does: one 4-byte store, the tag kept.
func SetInlineRecordState(block []byte, state uint32) { stores{}.setInlineState(block, state) }

// RewriteAsLayout3 rewrites the live or dead layout 4 out-of-place record
// of n bytes at the start of b, in place, as the layout 3 record of the
// same key, value, state and version (its Meta's Mod), as a server of the
// previous layout would have written it, and returns the new length (the
// slot word naming it must be given that length).
func RewriteAsLayout3(b []byte, n uint64) uint64 {
	le := binary.LittleEndian
	f4, f3 := format4, format3
	kl, vl := int(le.Uint16(b[f4.keyLenAt():])), int(le.Uint32(b[f4.valueLenAt():]))
	state, mod := le.Uint32(b[recState:]), f4.decodeMeta(b[recMeta:]).Mod
	kv := bytes.Clone(b[f4.keyAt() : f4.keyAt()+kl+vl])
	clear(b[:n])
	n3 := f3.recordLen(kl, vl)
	le.PutUint32(b[recState:], state)
	le.PutUint64(b[recMeta:], mod)
	le.PutUint16(b[f3.keyLenAt():], uint16(kl))
	le.PutUint32(b[f3.valueLenAt():], uint32(vl))
	copy(b[f3.keyAt():], kv)
	le.PutUint32(b[recCRC:], crc32.Checksum(b[recMeta:n3], castagnoli))
	return n3
}
