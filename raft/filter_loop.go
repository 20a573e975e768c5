package raft

import (
	"fmt"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/raft/peer"
)

// admit is the raft loop's half of the peer message filter (the peer
// layer's half is raft/peer/filter.go):
// it checks what a message claims about this node's log, which only the
// loop knows, and drops it (with its staged snapshot data) if raft would
// choke on it.
func (l *loop) admit(in inbound) bool {
	why, err := admitState(in.msg, l.rn, l.lastIndex(), l.commit)
	if err == nil {
		if err = l.admitTransfer(in.msg); err != nil {
			why, err = peer.DropTransfer, fmt.Errorf("%w: %w", peer.ErrDropped, err)
		}
	}
	if err == nil {
		return true
	}
	if in.staged != nil {
		in.staged.Discard()
	}
	l.n.dropped(why, in.msg.GetFrom(), err)
	return false
}

// admitState checks m against the log of rn, whose storage ends at last
// and whose commit index was at least commit at the last Ready. The
// storage's last index is raft's own once every Ready is handled; while one
// is pending (messages stepped earlier in this loop iteration), raft may
// hold entries the storage has not, or have replaced its tail with a
// shorter one. It may lower a heartbeat's commit index (see below).
func admitState(m *pb.Message, rn *etcdraft.RawNode, last, commit uint64) (peer.DropReason, error) {
	switch m.GetType() {
	case pb.MsgHeartbeat:
		// raft commits up to a heartbeat's Commit without checking its log
		// has that entry, and panics if not. A leader only sends a follower
		// the commit index up to what the follower acknowledged having
		// (durably, before the acknowledgement went out), so the store has
		// it; only a forged or confused heartbeat goes further.
		c := m.GetCommit()
		if c <= commit {
			return "", nil // raft's commit index is at least that already
		}
		if c > last {
			return peer.DropBeyondLog, fmt.Errorf("%w: heartbeat commits %d, the log ends at %d "+
				"(if this node's data directory was lost or replaced, remove the member and add it again)", peer.ErrDropped, c, last)
		}
		if rn.HasReady() {
			// raft's log may be shorter than the store's here; its commit
			// index is within it. A heartbeat's commit index is advisory
			// (the next heartbeat or append repeats it), so cap it there.
			if rc := rn.BasicStatus().HardState.GetCommit(); c > rc {
				m.Commit = new(rc)
			}
		}
	case pb.MsgAppResp:
		// A follower acknowledges only entries the leader sent it, and the
		// leader sends only entries its store has; an index beyond that
		// would move the follower's progress past the log.
		if m.GetIndex() > last {
			return peer.DropBeyondLog, fmt.Errorf("%w: append response for index %d, the log ends at %d", peer.ErrDropped, m.GetIndex(), last)
		}
	}
	return "", nil
}
