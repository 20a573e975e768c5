package table

import (
	"encoding/binary"

	"github.com/kvd-project/kvd/internal/revision"
)

// format is how one layout lays out a record's fixed part. Layout 4's
// records carry the key's whole revision.Meta (32 bytes); layouts 2 and
// 3's an 8-byte version, which a reader takes as the Meta's Mod (what it
// meant: the Raft index of the key's last write). Everything after the
// metadata is the same in every layout: keyLen (2), valueLen (4), and for
// an out-of-place record 2 reserved bytes, then key and value
// (docs/layout.md, "Records", "Inline records").
type format struct{ meta int }

var (
	format4 = format{meta: revision.Size}
	format3 = format{meta: 8} // layouts 2 and 3
)

// formatOf is the record format of a layout version.
func formatOf(layout uint32) format {
	if layout >= LayoutVersion {
		return format4
	}
	return format3
}

// Out-of-place offsets.
func (f format) keyLenAt() int   { return recMeta + f.meta }
func (f format) valueLenAt() int { return recMeta + f.meta + 2 }
func (f format) reservedAt() int { return recMeta + f.meta + 6 }
func (f format) keyAt() int      { return recMeta + f.meta + 8 }

// recordLen is the padded length of an out-of-place record.
func (f format) recordLen(keyLen, valueLen int) uint64 {
	return (uint64(f.keyAt()) + uint64(keyLen) + uint64(valueLen) + RecordAlign - 1) &^ (RecordAlign - 1)
}

// inlineHead is the fixed part of an inline record's payload: metadata,
// keyLen, valueLen.
func (f format) inlineHead() int { return f.meta + 6 }

// inlineLen is the length of a tagged inline record: 8·(1 + ⌈(head +
// keyLen + valueLen)/7⌉).
func (f format) inlineLen(keyLen, valueLen int) uint64 {
	payload := uint64(f.inlineHead()) + uint64(keyLen) + uint64(valueLen)
	return inlineWord * (1 + (payload+inlineGroup-1)/inlineGroup)
}

// decodeMeta reads the metadata at the start of b (f.meta bytes).
func (f format) decodeMeta(b []byte) revision.Meta {
	if f.meta != revision.Size {
		return revision.Meta{Mod: binary.LittleEndian.Uint64(b)}
	}
	m, _ := revision.Decode(b) // b is long enough: no error, no allocation
	return m
}
