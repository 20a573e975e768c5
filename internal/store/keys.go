package store

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kvd-project/kvd/internal/revision"
)

// Key prefixes. The single bytes order the groups; nothing reads across them.
const (
	prefixMeta   = 'm'
	prefixLog    = 'l'
	prefixMember = 'p'
	prefixKV     = 'k'
)

var (
	keyHardState = []byte("mhardstate")
	keyConfState = []byte("mconfstate")
	keyApplied   = []byte("mapplied")
	keySnapshot  = []byte("msnapshot")
	keyTrunc     = []byte("mtrunc")
	keyGen       = []byte("mgen")
	keyClusterID = []byte("mcluster")
	keyRestored  = []byte("mrestored")
	keyNodeID    = []byte("mnode")
	keyRemoved   = []byte("mremoved")

	logStart    = []byte{prefixLog}
	logEnd      = []byte{prefixLog + 1}
	memberStart = []byte{prefixMember}
	memberEnd   = []byte{prefixMember + 1}
	kvStart     = []byte{prefixKV}
	kvEnd       = []byte{prefixKV + 1}
)

func logKey(index uint64) []byte { return appendLogKey(nil, index) }

func appendLogKey(dst []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, prefixLog), index)
}

func memberKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixMember}, id)
}

// genPrefix is the first key of generation gen; genPrefix(gen+1) bounds it.
func genPrefix(gen uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixKV}, gen)
}

// genEnd is the exclusive upper bound of generation gen's keys.
func genEnd(gen uint64) []byte {
	if gen == math.MaxUint64 {
		return kvEnd
	}
	return genPrefix(gen + 1)
}

// appendKVKey appends the key of user key k in generation gen to dst.
func appendKVKey(dst []byte, gen uint64, k []byte) []byte {
	dst = append(dst, prefixKV)
	dst = binary.BigEndian.AppendUint64(dst, gen)
	return append(dst, k...)
}

const kvKeyHeader = 9 // prefix + be64(gen)

// appendKVValue appends the stored form of (m, value) to dst: the key's
// revision metadata (internal/revision's encoding), then the value.
func appendKVValue(dst []byte, m revision.Meta, value []byte) []byte {
	return append(m.Append(dst), value...)
}

// SplitValue splits a stored KV value into the key's revision metadata and
// its value. The value aliases raw.
func SplitValue(raw []byte) (m revision.Meta, value []byte, err error) {
	if len(raw) < revision.Size {
		return revision.Meta{}, nil, fmt.Errorf("%w: kv value of %d bytes", ErrCorrupt, len(raw))
	}
	m, _ = revision.Decode(raw)
	return m, raw[revision.Size:], nil
}

func encodeU64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func decodeU64(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: want 8 bytes, got %d", ErrCorrupt, len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

// truncState is the last compacted log position: entries up to and
// including index are gone, but their term is kept for log matching.
type truncState struct{ index, term uint64 }

func (t truncState) encode() []byte {
	b := binary.LittleEndian.AppendUint64(nil, t.index)
	return binary.LittleEndian.AppendUint64(b, t.term)
}

func decodeTrunc(b []byte) (truncState, error) {
	if len(b) != 16 {
		return truncState{}, fmt.Errorf("%w: truncation state of %d bytes", ErrCorrupt, len(b))
	}
	return truncState{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}, nil
}
