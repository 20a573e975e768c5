package backup

import (
	"encoding/binary"
	"fmt"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
)

// Format is the format version this package writes and reads.
const Format = 1

// Sizes of the fixed parts.
const (
	HeaderLen    = 36
	recordHead   = 2 + 4 + 8
	TrailerLen   = 32 // SHA-256
	magic        = "KVDSNAP\n"
	MaxKeyLen    = limits.MaxKey
	MaxValueLen  = limits.MaxValue
	MaxRecordLen = recordHead + MaxKeyLen + MaxValueLen
)

// MaxIndex bounds a backup's index: half the largest log index kvd's
// peers may name (2^62; raft refuses messages beyond it), so that the
// cluster restored from it has room to grow its log. A cluster restored
// at a larger one could elect no leader, one near 2^64 wraps the log, and
// one at 2^62 itself elects a leader whose first entry no follower takes:
// it commits nothing.
const MaxIndex = 1 << 61

// Errors. A reader's errors wrap one of them.
var (
	ErrFormat    = errs.ErrBackupFormat
	ErrTruncated = errs.ErrBackupTruncated
	ErrChecksum  = errs.ErrBackupChecksum
)

// Header describes a backup.
type Header struct {
	Index uint64 // applied Raft index of the state
	Keys  uint64 // number of records
	// Cluster is the id of the cluster the backup was taken from (0:
	// unknown).
	Cluster uint64
}

// check checks what a header says on its own.
func (h Header) check() error {
	if h.Index > MaxIndex {
		return fmt.Errorf("%w: index %d beyond %d", ErrFormat, h.Index, uint64(MaxIndex))
	}
	return nil
}

func appendHeader(b []byte, h Header) []byte {
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint16(b, Format)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint64(b, h.Index)
	b = binary.LittleEndian.AppendUint64(b, h.Keys)
	return binary.LittleEndian.AppendUint64(b, h.Cluster)
}

func appendRecordHead(b []byte, keyLen, valueLen int, version uint64) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(keyLen))
	b = binary.LittleEndian.AppendUint32(b, uint32(valueLen))
	return binary.LittleEndian.AppendUint64(b, version)
}
