package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/internal/wal"
)

// walCollector shows the Raft log's health in the "wal" mode (--raft-log):
// its fdatasyncs and their latency, what it writes, the segment files it
// holds. In the "pebble" mode it collects nothing, so the kvd_wal_* series
// are absent (the log's writes are then Pebble's). The counters live in
// internal/wal as atomics, read here at scrape time: the log's write path
// does no metrics work of its own.
type walCollector struct {
	s *Server

	syncs, syncDuration, bytes, entries, rolls, compactions, resets *prometheus.Desc
	segments, spares, diskBytes, first, last                        *prometheus.Desc
}

func newWALCollector(s *Server) *walCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &walCollector{
		s:            s,
		syncs:        d("kvd_wal_syncs_total", "fdatasyncs of the Raft log (--raft-log=wal): one per group commit (Raft batch) and one per segment roll."),
		syncDuration: d("kvd_wal_sync_duration_seconds", "Duration of the Raft log's fdatasyncs (--raft-log=wal)."),
		bytes:        d("kvd_wal_bytes_written_total", "Record bytes written to the Raft log's segment files (--raft-log=wal)."),
		entries:      d("kvd_wal_entries_total", "Raft entries appended to the Raft log, replaced ones included (--raft-log=wal)."),
		rolls:        d("kvd_wal_segment_rolls_total", "Segments of the Raft log ended because the next record did not fit (--raft-log=wal)."),
		compactions:  d("kvd_wal_compactions_total", "Prefix truncations of the Raft log after a snapshot (--raft-log=wal)."),
		resets:       d("kvd_wal_resets_total", "Resets of the Raft log to a snapshot received from the leader (--raft-log=wal)."),
		segments:     d("kvd_wal_segments", "Segment files the Raft log holds, the active one included (--raft-log=wal)."),
		spares:       d("kvd_wal_spare_segments", "Freed segment files kept for reuse (--raft-log=wal)."),
		diskBytes:    d("kvd_wal_disk_bytes", "Bytes of the Raft log's segment and spare files, each preallocated in full (--raft-log=wal)."),
		first:        d("kvd_wal_first_index", "Index of the first entry the Raft log holds (--raft-log=wal)."),
		last:         d("kvd_wal_last_index", "Index of the last entry the Raft log holds (--raft-log=wal)."),
	}
}

func (c *walCollector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{c.syncs, c.syncDuration, c.bytes, c.entries, c.rolls, c.compactions, c.resets,
		c.segments, c.spares, c.diskBytes, c.first, c.last}
}

// Describe implements prometheus.Collector.
func (c *walCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *walCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.s.walStats()
	if !ok {
		return
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(c.syncs, st.Syncs)
	buckets := make(map[float64]uint64, len(wal.SyncBuckets))
	for i, le := range wal.SyncBuckets {
		buckets[le] = st.SyncCounts[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.syncDuration, st.Syncs, st.SyncSeconds, buckets)
	counter(c.bytes, st.BytesWritten)
	counter(c.entries, st.Entries)
	counter(c.rolls, st.Rolls)
	counter(c.compactions, st.Compactions)
	counter(c.resets, st.Resets)
	gauge(c.segments, float64(st.Segments))
	gauge(c.spares, float64(st.Spares))
	gauge(c.diskBytes, float64(int64(st.Segments+st.Spares)*st.SegmentSize))
	gauge(c.first, float64(st.FirstIndex))
	gauge(c.last, float64(st.LastIndex))
}

// walStats are the Raft log's counters; ok false in the "pebble" mode or
// once the store is closed.
func (s *Server) walStats() (wal.Stats, bool) {
	st, release, err := s.node.Acquire()
	if err != nil {
		return wal.Stats{}, false
	}
	defer release()
	return st.WALStats()
}
