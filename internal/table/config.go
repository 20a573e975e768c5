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
)

// Config shapes a table. The zero Config is valid and means all defaults.
type Config struct {
	// BytesPerSlot sizes the bucket array from the region's length: the
	// bucket count is the largest power of two (at least 2) with
	// 8*buckets*BytesPerSlot <= region length. At least 16. Default
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
	// Now is the clock stamping records into limbo. Default time.Now.
	Now func() time.Time
}

// Validate reports the first out-of-range field, wrapping ErrBadConfig.
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
	return c
}

// buckets picks the bucket count for a region of size n.
func (c Config) buckets(n uint64) uint32 {
	if c.Buckets != 0 {
		return uint32(c.Buckets)
	}
	want := n / (SlotsPerBucket * uint64(c.BytesPerSlot))
	b := uint64(2)
	for b*2 <= want && b*2 <= MaxBuckets {
		b *= 2
	}
	return uint32(b)
}
