package raft

import (
	"fmt"
	"sync"
)

// A removed member stops for good, as etcd's does ("the member has been
// permanently removed from the cluster").
//
// It learns of its removal in one of three ways: it applies its own
// removal (it was caught up); a member that applied it tells it (the
// farewell, raft/peer/removal.go), which is how a follower the leader no
// longer talks to learns; or a member refuses its session because it was
// removed (a node cut off during its removal, or restarted). Each way
// ends in stopRemoved, which
//
//  1. records the removal in the store (synced), so that the data
//     directory refuses to start again (checkNotRemoved);
//  2. stops the raft loop, so nothing more is applied;
//  3. calls Config.OnRemoved, which withdraws every read the node serves
//     (the server's region and connections);
//  4. records the *RemovedError as the node's failure (Failure, Failed):
//     its process exits naming it.
//
// Only then is the removal acknowledged: the farewell's session closes,
// and the leader's RemoveMember returns (it waits for the farewell), so an
// operator who saw the removal succeed reads nothing stale from the
// removed node afterwards. A removed node that is cut off cannot be told;
// it serves its last state at the serializable level until it talks to a
// member again, as any partitioned node does.

// removal is a node's removal record.
type removal struct {
	mark  sync.Once     // records the removal and stops the loop
	stopc chan struct{} // closed to stop the loop
	fence sync.Once     // withdraws the reads and records the failure
}

// removed reports whether the node learned it was removed (the loop stops).
func (r *removal) removed() bool {
	select {
	case <-r.stopc:
		return true
	default:
		return false
	}
}

// stopRemoved stops the node, removed from the cluster; by is the member
// that told it (0: it applied its own removal). inLoop says the raft loop
// calls it (and returns at once, applying nothing more); from any other
// goroutine it waits for the loop to stop first. It returns once the node
// serves nothing more, whichever call came first.
func (n *Node) stopRemoved(by uint64, inLoop bool) {
	err := &RemovedError{ID: n.id, By: by}
	n.removal.mark.Do(func() {
		n.log.Error("this member has been permanently removed from the cluster; stopping", "err", err)
		if by != 0 {
			if serr := n.store.SetRemovedBy(by); serr != nil {
				n.log.Error("could not record the removal in the data directory", "err", serr)
			}
		}
		close(n.removal.stopc)
	})
	if !inLoop {
		// The loop, if it saw the removal first, fenced before it exited.
		<-n.donec
	}
	n.removal.fence.Do(func() {
		if f := n.cfg.OnRemoved; f != nil {
			f(err)
		}
		n.failure.record(err)
	})
}

// checkNotRemoved refuses to start a node whose data directory records
// its removal (its tombstone, or a member's word).
func (n *Node) checkNotRemoved() error {
	if n.store.Removed(n.cfg.ID) {
		return &RemovedError{ID: n.cfg.ID}
	}
	by, ok, err := n.store.RemovedBy()
	switch {
	case err != nil:
		return fmt.Errorf("raft: read whether this member was removed: %w", err)
	case ok:
		return &RemovedError{ID: n.cfg.ID, By: by}
	}
	return nil
}
