package mirror

import (
	"time"

	"github.com/kvd-project/kvd/internal/monoclock"
)

// OnLease is the node's read-lease callback (raft.Config.OnLease), called
// from the raft loop; the word holds the expiry alone. It takes only the lease lock, never the table lock,
// so that publishing (or ending) the lease never waits behind an apply, a
// rebuild or a repair pass.
func (m *Mirror) OnLease(_ uint64, expiry time.Time) {
	m.leaseMu.Lock()
	defer m.leaseMu.Unlock()
	m.leaseExpiry = expiry
	m.publishLeaseLocked()
}

// LeaseValid reports whether the lease word last published was set.
func (m *Mirror) LeaseValid() bool {
	m.leaseMu.Lock()
	defer m.leaseMu.Unlock()
	return m.leaseValid
}

// setRebuilding withholds the lease while the region is rebuilt (from new
// readers: an expiry a client cached before still holds, see
// rebuildLocked).
func (m *Mirror) setRebuilding(on bool) {
	m.leaseMu.Lock()
	defer m.leaseMu.Unlock()
	m.rebuilding = on
	m.publishLeaseLocked()
}

func (m *Mirror) publishLeaseLocked() {
	if m.retired {
		return
	}
	var w uint64
	if !m.rebuilding && !m.leaseExpiry.IsZero() {
		w = uint64(monoclock.At(m.leaseExpiry))
	}
	m.tbl.SetLease(w)
	m.leaseValid = w != 0
}
