package wal

import (
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvd-project/kvd/internal/limits"
)

// Sizes of the log. They are stated here once; doc.go explains how they
// bound what is read from disk.
const (
	// DefaultSegmentSize is the size of a segment file when Config leaves
	// it zero: large enough that rolling to the next segment (one extra
	// fdatasync) is rare, small enough that a compaction frees space soon.
	DefaultSegmentSize = 64 << 20
	// MinSegmentSize is the smallest segment Validate accepts. Small
	// segments exist for tests that want many rolls and recycles; a record
	// must still fit whole in one segment.
	MinSegmentSize = 4 << 10
	// MaxSegmentFile is the largest segment file Open reads; a larger file
	// is refused (the log never writes one: segments have a fixed size).
	MaxSegmentFile = 1 << 30
	// MaxRecord is the largest payload of one record, in bytes. A record
	// holds one marshaled raft entry, so this bounds the largest entry the
	// log accepts; it leaves room over the largest command
	// (limits.MaxTxnBytes) for raft's own framing and for conf changes.
	MaxRecord = 4 << 20
	// DefaultSpareSegments is how many freed segments are kept for reuse
	// when Config leaves SpareSegments zero.
	DefaultSpareSegments = 2
)

// MaxRecord must hold the largest command kvd proposes.
var _ = [MaxRecord - (limits.MaxTxnBytes + 64<<10)]struct{}{}

// Config configures a Log.
type Config struct {
	// Dir is the directory holding the log's segment files; the log owns
	// it (nothing else may write there). Required.
	Dir string
	// FS is the file system; vfs.Default when nil. Tests pass a crashable
	// memory file system.
	FS vfs.FS
	// SegmentSize is the size of each segment file (DefaultSegmentSize if
	// zero, at least MinSegmentSize). Segments are preallocated by writing
	// zeros, so that appends never change the file size and fdatasync
	// flushes data only.
	SegmentSize int64
	// SpareSegments is how many freed segments are kept for reuse instead
	// of being removed (DefaultSpareSegments if zero, -1 for none).
	SpareSegments int
	// Knobs are for tests; production leaves them zero.
	Knobs Knobs
}

// Knobs are test settings of a Log.
type Knobs struct {
	// SaltSource, if set, is read for each new segment's salt instead of
	// crypto/rand, so that a test can know a salt before it is drawn.
	SaltSource io.Reader
}

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = DefaultSegmentSize
	}
	switch {
	case c.SpareSegments == 0:
		c.SpareSegments = DefaultSpareSegments
	case c.SpareSegments < 0:
		c.SpareSegments = 0
	}
	return c
}

// Validate reports whether c (after defaults) can open a log.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return fmt.Errorf("wal: Config.Dir is required")
	case c.SegmentSize < MinSegmentSize || c.SegmentSize > MaxSegmentFile:
		return fmt.Errorf("wal: segment size %d outside [%d, %d]", c.SegmentSize, MinSegmentSize, MaxSegmentFile)
	case c.SegmentSize%recordAlign != 0:
		return fmt.Errorf("wal: segment size %d is not a multiple of %d", c.SegmentSize, recordAlign)
	}
	return nil
}

// maxPayload is the largest record payload a segment of this config holds
// together with its segment header and its end record.
func (c Config) maxPayload() int {
	return int(min(MaxRecord, c.SegmentSize-segmentReserve-hdrSize))
}
