package mirror

import (
	"time"

	"github.com/kvd-project/kvd/internal/errs"
)

// ErrRetired: the region was withdrawn (Retire); the node serves no reads.
var ErrRetired = errs.Classed(errs.ErrUnavailable, "mirror: this node no longer serves reads")

// Retire withdraws the region for good, for a node that must serve no
// more reads (one removed from the cluster): it stops the repair loop,
// then zeroes the whole region under the table lock and clears the lease.
// A one-sided reader then finds no header (its re-read fails, and it
// goes elsewhere), empty buckets (a miss, which it must prove with the
// header) or records that fail their checks; nothing it could take for a
// value. Call it once the store feeds the mirror nothing more (the raft
// loop has stopped): later applies would write into the zeroed region.
// RPC reads (Get) fail with ErrRetired from then on.
func (m *Mirror) Retire() {
	m.Close()
	m.tmu.Lock()
	defer m.tmu.Unlock()
	m.leaseMu.Lock()
	defer m.leaseMu.Unlock()
	m.retired = true
	m.leaseExpiry = time.Time{}
	clear(m.cfg.Region)
}
