package raft

import (
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// noteLostLog tells the operator, on the leader, that a follower no longer
// has entries it acknowledged: its data directory was lost, wiped or
// replaced, and it was started again as if new. Raft counted its
// acknowledgements towards commits, so an acknowledged write may now be
// on a minority of the disks, and it is lost if a node without it is
// elected. Nothing here can undo that; the operator is told at once
// (logged as an error, kvd_raft_follower_data_lost_total) so that the
// member is removed and added again before another node fails. Until then
// the follower is stuck: raft takes its rejections of the index it
// acknowledged for stale ones, and only a new leader starts it over.
// The signal is best effort: it needs an append to reach the follower. One
// lost while the follower's session was down leaves raft waiting for an
// answer that does not come (the follower drops the leader's heartbeats,
// whose commit index is beyond its log, filter_loop.go), and the node then
// only logs those drops.
//
// Why the signal is sound: a leader's Match for a follower is an index the
// follower acknowledged in this leader's term, and the follower's log
// matches the leader's up to it. A follower rejects an append at index i
// >= Match with a hint at or above Match unless its log ends below Match:
// its entries up to Match have terms no larger than the leader's entry at
// i, so raft's search for the conflict (findConflictByTerm) stops there. A
// rejection of an index below Match is a stale message raft ignores, and
// is ignored here too. Match starts at 0 with each leader, so a new leader
// only learns it from fresh acknowledgements.
func (l *loop) noteLostLog(m *pb.Message) {
	if m.GetType() != pb.MsgAppResp || !m.GetReject() || l.rn.BasicStatus().RaftState != etcdraft.StateLeader {
		return
	}
	from := m.GetFrom()
	var match uint64
	l.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
		if id == from {
			match = pr.Match
		}
	})
	if m.GetIndex() < match || m.GetRejectHint() >= match {
		return
	}
	l.n.metrics.followerDataLost.Inc()
	if ok, held := l.n.peerLog.Allow("lostlog", time.Now()); ok {
		l.n.log.Error("a follower lost entries it had acknowledged: its data directory was lost or replaced; "+
			"acknowledged writes may now be on a minority of the disks: remove the member and add it again (kvctl member remove, member add, kvd --join) before another node fails",
			"peer", from, "acknowledged_index", match, "its_log_ends_at", m.GetRejectHint(), "similar_not_logged", held)
	}
}
