package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/kvd-project/kvd/internal/wire"
)

// Stats counts what the client's GETs cost. Benchmarks and tests read it.
type Stats struct {
	Gets           uint64 // Get calls
	OneSided       uint64 // GETs answered one-sided (no RPC)
	OneSidedRounds uint64 // network round trips spent by one-sided GETs that succeeded
	OneSidedReads  uint64 // READs those round trips posted (header, buckets, records), and LeaseRefreshes
	OneSidedBytes  uint64 // bytes those READs fetched
	LeaseRefreshes uint64 // header READs made in the background to keep a node's lease expiry fresh
	ClockSyncs     uint64 // clock RPCs made to judge leases (background ones included)
	RPCGets        uint64 // GETs answered by RPC (asked for, or fallen back to)
	Fallbacks      uint64 // one-sided GETs that gave up and fell back to RPC
	AtomicOneSided uint64 // GetManyAtomic snapshots proven one-sided (double collect)
	AtomicRPC      uint64 // GetManyAtomic snapshots read by RPC
	Retries        map[string]uint64
}

type counters struct {
	gets, oneSided, roundTrips, rpcGets, fallbacks, clockSyncs       atomic.Uint64
	reads, readBytes, leaseRefreshes                                 atomic.Uint64
	atomicOneSided, atomicRPC                                        atomic.Uint64
	torn, stale, unstable, lease, clock, slow, geometry, conn, other atomic.Uint64
}

func (c *counters) retry(err error) {
	switch {
	case errors.Is(err, errTorn):
		c.torn.Add(1)
	case errors.Is(err, errStale):
		c.stale.Add(1)
	case errors.Is(err, errUnstable):
		c.unstable.Add(1)
	case errors.Is(err, errLease), errors.Is(err, errLeaseLate):
		c.lease.Add(1)
	case errors.Is(err, errClockStale):
		c.clock.Add(1)
	case errors.Is(err, errTooSlow):
		c.slow.Add(1)
	case errors.Is(err, errGeometry):
		c.geometry.Add(1)
	case errors.Is(err, errCandidates), errors.Is(err, errIncomplete):
		c.other.Add(1)
	default: // the connection or its transport failed
		c.conn.Add(1)
	}
}

// Stats returns a snapshot of the client's counters.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{
		Gets:           s.gets.Load(),
		OneSided:       s.oneSided.Load(),
		OneSidedRounds: s.roundTrips.Load(),
		AtomicOneSided: s.atomicOneSided.Load(),
		AtomicRPC:      s.atomicRPC.Load(),
		OneSidedReads:  s.reads.Load(),
		OneSidedBytes:  s.readBytes.Load(),
		LeaseRefreshes: s.leaseRefreshes.Load(),
		ClockSyncs:     s.clockSyncs.Load(),
		RPCGets:        s.rpcGets.Load(),
		Fallbacks:      s.fallbacks.Load(),
		Retries: map[string]uint64{
			"torn": s.torn.Load(), "stale": s.stale.Load(), "unstable": s.unstable.Load(),
			"lease": s.lease.Load(), "clock": s.clock.Load(), "slow": s.slow.Load(), "geometry": s.geometry.Load(),
			"connection": s.conn.Load(), "other": s.other.Load(),
		},
	}
}

// NodeStatus is one node's view of the cluster.
type NodeStatus = wire.NodeStatus

// Member is one member of the cluster.
type Member = wire.Member

func decodeJSON(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("kvd: bad status from server: %w", err)
	}
	return nil
}
