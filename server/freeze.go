package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/raft"
)

// ErrFrozen: Freeze was called on a server that is already frozen. It is
// raft.ErrFrozen: a server's freeze is its node's, plus the request gate.
var ErrFrozen = raft.ErrFrozen

// freezeGate is one freeze of one server: thaw is closed when it ends.
type freezeGate struct {
	until time.Time
	thaw  chan struct{}
}

// Freeze makes the server behave for d as if its process were stopped
// (SIGSTOP) on a machine whose RDMA NIC goes on serving one-sided READs of
// the table region, which is what a NIC does for a stopped process:
//
//   - the Raft node's loop stops (raft.Node.Freeze): no ticks, no peer
//     messages, no applies, no lease extension;
//   - nothing in the server writes the region: applies and lease updates
//     come from the stopped loop, and the freeze holds the table lock, so
//     the repair loop (and anything else that takes it) waits for the thaw;
//   - client RPCs, and new connections' first messages, wait for the thaw
//     before they are handled, and responses computed before the freeze
//     are held back until then too;
//   - the transport keeps serving one-sided READs of the region (over TCP
//     its own goroutine does, as the NIC would).
//
// It returns once the freeze is in effect; the server thaws by itself
// after d (Close ends a freeze early). A freeze is refused while another
// is under way (ErrFrozen).
func (s *Server) Freeze(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("server: freeze duration %v must be positive", d)
	}
	if s.ctx.Err() != nil {
		return raft.ErrStopped
	}
	g := &freezeGate{until: time.Now().Add(d), thaw: make(chan struct{})}
	if !s.frozen.CompareAndSwap(nil, g) {
		return ErrFrozen
	}
	// From here on new requests wait at the gate. Stop the loop before
	// taking the table lock: the loop takes that lock to apply.
	if err := s.node.Freeze(d); err != nil {
		s.frozen.Store(nil)
		close(g.thaw)
		if errors.Is(err, raft.ErrFrozen) {
			return ErrFrozen
		}
		return err
	}
	release := s.mirror.Hold()
	s.log.Warn("server frozen (fault injection); one-sided READs are still served", "for", d)
	go func() {
		t := time.NewTimer(time.Until(g.until))
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.ctx.Done(): // Close: let it take the lock
		}
		release()
		s.frozen.Store(nil)
		close(g.thaw)
		if s.ctx.Err() == nil {
			s.log.Warn("server thawed (fault injection)")
		}
	}()
	return nil
}

// awaitThaw waits, if the server is frozen, until it thaws or ctx ends.
func (s *Server) awaitThaw(ctx context.Context) error {
	g := s.frozen.Load()
	if g == nil {
		return nil
	}
	select {
	case <-g.thaw:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
