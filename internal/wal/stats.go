package wal

import (
	"sync/atomic"
	"time"
)

// SyncBuckets are the upper bounds, in seconds, of the buckets Stats sorts
// the log's fdatasyncs into: 100µs doubling up to about 3.3 s (beyond the
// last: only in the count and sum).
var SyncBuckets = func() [16]float64 {
	var b [16]float64
	for i := range b {
		b[i] = 100e-6 * float64(uint64(1)<<i)
	}
	return b
}()

// Stats are the log's counters since Open and its current shape, for an
// operator: how often and how fast it syncs, what it writes, how many
// files it holds.
type Stats struct {
	// Syncs counts the fdatasyncs that made records durable (one per
	// group commit, plus one per segment roll).
	Syncs uint64
	// SyncSeconds is the total time those fdatasyncs took.
	SyncSeconds float64
	// SyncCounts[i] counts the syncs that took at most SyncBuckets[i]
	// seconds (cumulative, as a Prometheus histogram's buckets are).
	SyncCounts [len(SyncBuckets)]uint64
	// BytesWritten counts record bytes written to segment files.
	BytesWritten uint64
	// Entries counts the raft entries appended (replaced ones included).
	Entries uint64
	// Compactions and Resets count the prefix truncations (Compact) and
	// the resets to a snapshot (Reset).
	Compactions, Resets uint64
	// Rolls counts the segments ended because the next record did not fit.
	Rolls uint64
	// Segments is the number of segment files the log holds, the active
	// one included; Spares the freed ones kept for reuse. Each file is
	// SegmentSize bytes.
	Segments, Spares int
	SegmentSize      int64
	// FirstIndex and LastIndex bound the entries the log holds (FirstIndex
	// is LastIndex+1 when it holds none).
	FirstIndex, LastIndex uint64
}

// counters are Stats kept with atomics: the log updates them under its
// lock, and Stats reads them without it, so that reading never waits for
// an fdatasync in progress. Updating them allocates nothing.
type counters struct {
	syncs, syncNanos, bytes, entries atomic.Uint64
	compactions, resets, rolls       atomic.Uint64
	syncBuckets                      [len(SyncBuckets)]atomic.Uint64
	segments, spares, first, lastIdx atomic.Uint64
}

// observeSync counts one fdatasync that took d.
func (c *counters) observeSync(d time.Duration) {
	c.syncs.Add(1)
	c.syncNanos.Add(uint64(max(d, 0)))
	s := d.Seconds()
	for i, b := range SyncBuckets {
		if s <= b {
			c.syncBuckets[i].Add(1)
			return
		}
	}
}

// publish stores the log's shape for Stats. Called with l.mu held, after
// every change to it.
func (l *Log) publish() {
	l.stats.segments.Store(uint64(len(l.segs)))
	l.stats.spares.Store(uint64(len(l.spares)))
	l.stats.first.Store(l.trunc.index + 1)
	l.stats.lastIdx.Store(l.last())
}

// Stats returns the log's counters and shape. It takes no lock: the
// values are each current, not necessarily all of the same moment.
func (l *Log) Stats() Stats {
	c := &l.stats
	st := Stats{
		Syncs:        c.syncs.Load(),
		SyncSeconds:  time.Duration(c.syncNanos.Load()).Seconds(),
		BytesWritten: c.bytes.Load(),
		Entries:      c.entries.Load(),
		Compactions:  c.compactions.Load(),
		Resets:       c.resets.Load(),
		Rolls:        c.rolls.Load(),
		Segments:     int(c.segments.Load()),
		Spares:       int(c.spares.Load()),
		SegmentSize:  l.cfg.SegmentSize,
		FirstIndex:   c.first.Load(),
		LastIndex:    c.lastIdx.Load(),
	}
	var cum uint64
	for i := range c.syncBuckets {
		cum += c.syncBuckets[i].Load()
		st.SyncCounts[i] = cum
	}
	return st
}
