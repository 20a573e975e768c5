package table

import (
	"fmt"
	"math"
	"time"
)

// Defaults for Config's zero fields.
const (
	// DefaultBytesPerSlot gives one slot per 128 bytes of region: the
	// bucket array takes between 1/32 and 1/16 of the region (the bucket
	// count is rounded down to a power of two). Records averaging well under
	// 128 bytes fill the buckets before the record area.
	DefaultBytesPerSlot = 128
	// DefaultGrace is how long a superseded record's bytes stay untouched.
	// Clients accept a GET only if it took less than half of it.
	DefaultGrace = time.Second
	// DefaultInlineGrace is how long a superseded inline record's arena
	// bytes stay untouched (Config.InlineGrace). Clients accept a GET that
	// took arena bytes only if it took less than half of it, so it is far
	// shorter than Grace only because a one-round-trip GET is: a short
	// period keeps arenas from filling with superseded records of hot keys
	// (docs/layout.md, "Parameters").
	DefaultInlineGrace = 100 * time.Millisecond
	// arenaRecords is how many records of InlineMax bytes an arena holds:
	// a bucket's 8 keys, and room for superseded ones in their grace period
	// (the design's c = 10, §6.2).
	arenaRecords = 10
)

// Config shapes a table. The zero Config is valid and means all defaults.
type Config struct {
	// BytesPerSlot sizes the bucket array from the region's length: the
	// bucket count is the largest power of two (at least 2) with
	// buckets*(8*BytesPerSlot + arena) <= region length. At least 16. Default
	// DefaultBytesPerSlot. Ignored when Buckets is set.
	BytesPerSlot int
	// Buckets, if non-zero, is the bucket count: a power of two, 2 up to
	// MaxBuckets.
	Buckets int
	// Grace is how long the bytes of a superseded or deleted record are
	// left untouched before reuse. The header advertises it in whole
	// milliseconds, rounded down; it must be at least 1ms and fit 32 bits
	// of milliseconds. Default DefaultGrace.
	Grace time.Duration
	// InlineMax, if non-zero, gives every bucket an arena of about
	// 10*InlineMax bytes after its slot words, and records of at most
	// InlineMax bytes in the inline format (InlineLen) live there, in the
	// arena of the bucket whose slot names them, so that a client reads a
	// key's slot and value in one READ. A multiple of 8, MinInline to
	// MaxInline. Arenas come on top of the region share BytesPerSlot gives
	// each slot. Default 0: no arenas, every record in the record area.
	InlineMax int
	// InlineGrace is Grace for arena bytes: 1ms to Grace, whole
	// milliseconds in the header. Default DefaultInlineGrace, or Grace if
	// that is shorter. Ignored without InlineMax.
	InlineGrace time.Duration
	// Now is the clock stamping records into limbo. Default time.Now.
	Now func() time.Time
}

// Validate reports the first out-of-range field, wrapping ErrBadConfig.
// Zero fields are checked as their defaults; c itself is not changed.
func (c Config) Validate() error {
	switch {
	case c.BytesPerSlot != 0 && c.BytesPerSlot < 16:
		return fmt.Errorf("%w: BytesPerSlot %d < 16", ErrBadConfig, c.BytesPerSlot)
	case c.Buckets != 0 && (c.Buckets < 2 || c.Buckets > MaxBuckets || c.Buckets&(c.Buckets-1) != 0):
		return fmt.Errorf("%w: Buckets %d is not a power of two in [2, %d]", ErrBadConfig, c.Buckets, MaxBuckets)
	case c.Grace < 0 || c.Grace != 0 && c.Grace < time.Millisecond:
		return fmt.Errorf("%w: Grace %v < 1ms", ErrBadConfig, c.Grace)
	case c.Grace/time.Millisecond > math.MaxUint32:
		return fmt.Errorf("%w: Grace %v too long", ErrBadConfig, c.Grace)
	case c.InlineMax != 0 && (c.InlineMax < MinInline || c.InlineMax > MaxInline || c.InlineMax%RecordAlign != 0):
		return fmt.Errorf("%w: InlineMax %d is not a multiple of 8 in [%d, %d]", ErrBadConfig, c.InlineMax, MinInline, MaxInline)
	case c.InlineGrace < 0 || c.InlineGrace != 0 && c.InlineGrace < time.Millisecond:
		return fmt.Errorf("%w: InlineGrace %v < 1ms", ErrBadConfig, c.InlineGrace)
	case c.InlineGrace > c.withDefaults().Grace:
		return fmt.Errorf("%w: InlineGrace %v longer than Grace", ErrBadConfig, c.InlineGrace)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.BytesPerSlot == 0 {
		c.BytesPerSlot = DefaultBytesPerSlot
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.InlineGrace == 0 {
		c.InlineGrace = min(DefaultInlineGrace, c.Grace)
	}
	if c.InlineMax == 0 {
		c.InlineGrace = c.Grace // layout 2's one period, as the header says
	}
	return c
}

// bucketBytes is the distance between buckets: the slot words, then the
// arena, a whole number of cache lines.
func (c Config) bucketBytes() uint32 {
	arena := uint32(arenaRecords * c.InlineMax)
	return BucketSize + (arena+BucketSize-1)/BucketSize*BucketSize
}

// buckets picks the bucket count for a region of size n.
func (c Config) buckets(n uint64) uint32 {
	if c.Buckets != 0 {
		return uint32(c.Buckets)
	}
	want := n / (SlotsPerBucket*uint64(c.BytesPerSlot) + uint64(c.bucketBytes()-BucketSize))
	b := uint64(2)
	for b*2 <= want && b*2 <= MaxBuckets {
		b *= 2
	}
	return uint32(b)
}
