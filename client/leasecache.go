package client

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/transport"
)

// A linearizable hit needs a lease expiry E from the node's header, judged
// after the GET's last READ. E is a statement about time, not a flag: when
// the node published it, no other node could lead, or commit anything,
// before the node's clock reads E, and nothing the node does later
// withdraws that (docs/layout.md, Leases, "The cached expiry"). So a hit need
// not read the header: the client keeps the largest E it has read from the
// node's header and judges the hit against it, which saves a READ per GET.
//
// The conditions that keep this sound:
//
//   - E and the clock sample describe the same clock: both live with the
//     connection (a restarted node has a new clock, and a new connection),
//     and E with the geometry (a header of another generation replaces
//     both: loadGeometry).
//   - The E that judges an answer was read before the data the answer rests
//     on: cached before the attempt's first READ was posted (newAttempt),
//     or, for a hit whose record a later round trip read, by round trip
//     1's header READ. Never one read in the data's own batch (READs of one
//     batch may run in any order) or after it: such an E could come from a
//     lease the node was granted after the data was read (right after it
//     won an election), which says nothing about that moment. A miss is
//     judged only by the E cached before the GET, since its proof finds
//     some instant of the GET at which the node lacked the key, and the
//     lease must cover whichever it is. An attempt that read a valid E
//     only too late fails with errLeaseLate; the next one starts from it.
//   - Only the node's own header gives E for its region.
//
// E is kept fresh by a background header READ when the client's bound on
// the node's clock comes within leaseRefreshAhead of it, started by a GET
// (so an idle client costs nothing), and, if a GET finds E within
// leaseDueMargin of its bound, by a header READ in the GET's first batch.

// Lease cache policy.
const (
	// leaseRefreshAhead: a GET that finds the cached E this close to the
	// clock bound starts a background header READ. The leader republishes
	// its lease every tick (100ms), about 800ms ahead of its clock.
	leaseRefreshAhead = 400 * time.Millisecond
	// leaseDueMargin: a GET that finds the cached E this close reads the
	// header in its own first batch, so that the decision, a little later,
	// still finds a valid lease.
	leaseDueMargin = 50 * time.Millisecond
)

// leaseCache is the largest lease expiry read from one geometry's headers
// (node clock; 0: none yet), and the largest store revision: a hit's
// answer is at a revision no lower than one read before its record, under
// the same conditions as the expiry (docs/layout.md, "The revision word").
type leaseCache struct {
	exp        atomic.Uint64
	rev        atomic.Uint64
	refreshing atomic.Bool
}

// offerHeader keeps what a header read says that outlasts the read: its
// lease expiry and its revision.
func (l *leaseCache) offerHeader(h table.Header) {
	l.offer(h.LeaseExpiry)
	offerMax(&l.rev, h.Revision)
}

// offer keeps exp if it is later than what is cached.
func (l *leaseCache) offer(exp uint64) { offerMax(&l.exp, exp) }

// offerMax stores v in w if it is larger than what w holds.
func offerMax(w *atomic.Uint64, v uint64) {
	for {
		cur := w.Load()
		if v <= cur || w.CompareAndSwap(cur, v) {
			return
		}
	}
}

// leaseDue reports whether a linearizable GET starting at now must read the
// header itself: no cached E, no clock sample, or E within leaseDueMargin of
// the bound. It also starts a background refresh when E is getting close.
// exp is the cached E to judge the GET by (see the conditions above).
func (n *node) leaseDue(g *geometry, now mono) (exp uint64, due bool) {
	exp = g.lease.exp.Load()
	u, ok := n.clock.upperAt(now)
	if exp == 0 || !ok || u+int64(leaseDueMargin) >= int64(exp) {
		return exp, true
	}
	if u+int64(leaseRefreshAhead) >= int64(exp) {
		n.refreshLease(g)
	}
	return exp, false
}

// refreshLease reads the header in the background (one at a time per
// geometry) and offers its lease to the cache; a header of another
// generation or geometry makes the node adopt it (loadGeometry).
func (n *node) refreshLease(g *geometry) {
	if g.lease.refreshing.Swap(true) {
		return
	}
	go func() {
		defer g.lease.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), clockTimeout)
		defer cancel()
		var hdr [table.HeaderSize]byte
		if n.conn.Read(ctx, []transport.ReadOp{{Remote: g.region, Dst: hdr[:]}}) != nil {
			return // a broken connection is noticed by the next GET
		}
		if n.counters != nil {
			n.counters.reads.Add(1)
			n.counters.readBytes.Add(table.HeaderSize)
			n.counters.leaseRefreshes.Add(1)
		}
		h, err := checkHeader(g, hdr[:])
		switch {
		case err == nil:
			g.lease.offerHeader(h)
		case n.geo.Load() == g:
			_ = n.loadGeometry(ctx) // a rebuild: adopt it now; on failure the next GET retries
		}
	}()
}
