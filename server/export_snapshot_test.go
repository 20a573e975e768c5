package server

import "github.com/prometheus/client_golang/prometheus/testutil"

// HoldSnapshotSlots takes every backup stream slot, as streams in progress
// would, and returns their release. For tests.
func HoldSnapshotSlots(s *Server) (release func()) {
	for range MaxSnapshotStreams {
		if !s.snapSlots.tryAcquire() {
			panic("snapshot slot taken")
		}
	}
	return func() {
		for range MaxSnapshotStreams {
			select { // never blocks, even when a broken limit let a stream take none
			case <-s.snapSlots.ch:
			default:
			}
		}
	}
}

// SnapshotStreams is kvd_snapshot_streams_total{outcome}.
func SnapshotStreams(s *Server, outcome string) float64 {
	return testutil.ToFloat64(s.metrics.snapshots.WithLabelValues(outcome))
}
