package raft

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/transport"
)

// promoteSlack is how far behind the leader's last index a learner's log
// may be for PromoteMember to go ahead: close enough that the new voter
// does not stall commits while it catches up.
const promoteSlack = 64

// heardGrace is how many election timeouts a membership change waits for
// members the leader has not heard from (a learner to promote, the voters
// a removal would leave) before it is refused: just after an election, or
// after a learner's node started, the leader may not have heard from them
// yet.
const heardGrace = 3

// ErrLastVoter: RemoveMember would leave the group without voters.
var ErrLastVoter = errs.Classed(errs.ErrBadRequest, "raft: cannot remove the last voter")

// AddMember adds node id, reachable at addr, as a learner: it receives the
// log (or a snapshot) but does not vote, so the group's quorum is unchanged
// while it catches up. Promote it with PromoteMember. Call it on the leader;
// the new node must be started with Config.Join. It returns once the change
// is applied here.
//
// Membership changes go one at a time: while an earlier change is not yet
// applied, calls wait (retrying each tick) until ctx ends.
func (n *Node) AddMember(ctx context.Context, id uint64, addr string) error {
	if id == 0 || addr == "" {
		return fmt.Errorf("%w: member %d at %q", ErrConfig, id, addr)
	}
	return n.changeMembers(ctx, pb.ConfChangeAddLearnerNode, id, addr)
}

// AddVoter adds node id, reachable at addr, as a voter at once (raft's
// ConfChangeAddNode, as etcd adds a member that is not a learner): it
// counts towards every quorum from the moment the change applies, before
// its node has run or caught up. So it is refused (ErrNoQuorum, after a
// few election timeouts, heardGrace) unless the voters the leader has
// heard from lately, itself included, are a quorum of the voters with
// the new one: then the group keeps committing while the new node starts
// and catches up. That refuses it in a one-voter group, whose leader would
// step down at once (CheckQuorum) until the new node runs; add a learner
// and promote it there (AddMember). Otherwise as AddMember.
func (n *Node) AddVoter(ctx context.Context, id uint64, addr string) error {
	if id == 0 || addr == "" {
		return fmt.Errorf("%w: member %d at %q", ErrConfig, id, addr)
	}
	return n.changeMembers(ctx, pb.ConfChangeAddNode, id, addr)
}

// UpdateMember changes member id's peer address to addr (raft's
// ConfChangeUpdateNode, etcd's MemberUpdate): every node records it, and
// dials it from then on whenever it (re)connects to id; a connection open
// to the old address lasts until it breaks. Restart the member's node to
// listen at addr. An address another member has is refused
// (ErrAddrInUse), as an unknown member is (ErrMemberNotFound). It
// returns once the change is applied here.
func (n *Node) UpdateMember(ctx context.Context, id uint64, addr string) error {
	if id == 0 || addr == "" {
		return fmt.Errorf("%w: member %d at %q", ErrConfig, id, addr)
	}
	return n.changeMembers(ctx, pb.ConfChangeUpdateNode, id, addr)
}

// PromoteMember makes learner id a voter. It waits while the learner
// catches up, until its log is within a few entries of the leader's (so
// the promotion does not stall commits), retrying each tick until ctx
// ends. A learner the leader has not heard from within a few election
// timeouts (heardGrace: its node never started, or cannot be reached)
// is refused then with ErrLearnerNotReady, saying so, as etcd refuses a learner not in
// sync; a voter is refused with ErrNotLearner.
func (n *Node) PromoteMember(ctx context.Context, id uint64) error {
	return n.changeMembers(ctx, pb.ConfChangeAddNode, id, "")
}

// RemoveMember removes node id (voter or learner). Removing the leader
// hands leadership off first, as etcd does (handOff), and returns a
// *NotLeaderError naming the new leader, which the caller asks instead;
// if no voter takes over, the leader removes itself and steps down once
// the change is applied. Its lease is revoked
// at that moment, and CheckQuorum's vote suppression in the remaining nodes
// still covers the rest of the lease it had handed out. Removing a voter
// is refused with ErrNoQuorum (after a few election timeouts, heardGrace)
// while the voters left would not include a quorum of members heard from
// lately: it would stop every commit, this change's undoing included.
//
// A removed member is told so (raft/peer/removal.go) and stops serving;
// RemoveMember waits (a few election timeouts at most) until it has, so
// that a removal once acknowledged leaves no node serving stale reads,
// unless the removed node is cut off (then it learns when it next talks to
// a member).
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	if id == n.id && n.Status().IsLeader {
		if lead, ok := n.handOff(ctx); ok {
			// Not applied here: the caller (the client) asks the new
			// leader, which removes this node as a follower.
			return n.notLeader(lead)
		}
	}
	if err := n.changeMembers(ctx, pb.ConfChangeRemoveNode, id, ""); err != nil {
		return err
	}
	if id != n.id && !n.peers.FarewellDone(ctx, id) {
		n.log.Warn("removed member did not confirm it stopped; it stops when it next talks to a member", "member", id)
	}
	return nil
}

func (n *Node) changeMembers(ctx context.Context, typ pb.ConfChangeType, id uint64, addr string) error {
	n.confMu.Lock()
	defer n.confMu.Unlock()
	start := time.Now()
	for {
		if st := n.Status(); !st.IsLeader {
			return n.notLeader(st.LeaderID)
		}
		reqID := n.nextReq.Add(1)
		p := &proposal{
			reqID: reqID,
			cc: &pb.ConfChange{
				Type:    typ.Enum(),
				NodeId:  new(id),
				Context: appendMemberContext(nil, memberContext{proposer: n.id, reqID: reqID, addr: addr}),
			},
			done: make(chan result, 1),
		}
		err := n.propose(ctx, p).err
		switch {
		case (errors.Is(err, ErrLearnerNotReady) || errors.Is(err, ErrNoQuorum)) &&
			time.Since(start) < heardGrace*n.cfg.electionTimeout():
			// Not heard from yet is not down yet (heardGrace).
		case !errors.Is(err, ErrConfChangeBusy):
			return err
		}
		select {
		case <-time.After(n.cfg.TickInterval):
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		case <-n.donec:
			return n.stoppedErr()
		}
	}
}

// checkConfChange vets a change against the applied configuration before
// it is proposed; raft would otherwise turn some invalid ones into no-ops
// without telling anyone.
func (l *loop) checkConfChange(cc *pb.ConfChange) error {
	if l.confProposed || l.applied < l.confBarrier {
		return fmt.Errorf("%w: an earlier change is not applied yet", ErrConfChangeBusy)
	}
	cs := l.st.ConfState()
	id := cc.GetNodeId()
	voter, learner := slices.Contains(cs.GetVoters(), id), slices.Contains(cs.GetLearners(), id)
	mc, err := decodeMemberContext(cc.GetContext())
	if err != nil {
		return err
	}
	switch cc.GetType() {
	case pb.ConfChangeAddLearnerNode:
		return l.checkAddition(id, voter || learner, mc.addr)
	case pb.ConfChangeAddNode:
		switch {
		case mc.addr != "": // a new voter (AddVoter); a promotion names no address
			if err := l.checkAddition(id, voter || learner, mc.addr); err != nil {
				return err
			}
			return l.checkQuorumWith(id, cs.GetVoters())
		case voter:
			return fmt.Errorf("%w: member %d is already a voter", ErrNotLearner, id)
		case !learner:
			return fmt.Errorf("%w: %d", ErrMemberNotFound, id)
		}
		return l.checkPromotion(id)
	case pb.ConfChangeUpdateNode:
		if !voter && !learner {
			return fmt.Errorf("%w: %d", ErrMemberNotFound, id)
		}
		return l.checkAddrFree(id, mc.addr)
	case pb.ConfChangeRemoveNode:
		switch {
		case !voter && !learner:
			return fmt.Errorf("%w: %d", ErrMemberNotFound, id)
		case voter && len(cs.GetVoters()) == 1:
			return ErrLastVoter
		case voter:
			return l.checkQuorumWithout(id, cs.GetVoters())
		}
	}
	return nil
}

// checkAddition refuses to add node id at addr: a member already (exists),
// a removed id, or another member's address.
func (l *loop) checkAddition(id uint64, exists bool, addr string) error {
	if exists {
		return fmt.Errorf("%w: %d", ErrMemberExists, id)
	}
	if l.st.Removed(id) {
		return fmt.Errorf("%w: %d", ErrMemberRemoved, id)
	}
	return l.checkAddrFree(id, addr)
}

// checkAddrFree refuses addr for member id if another member has it.
func (l *loop) checkAddrFree(id uint64, addr string) error {
	if addr == "" {
		return fmt.Errorf("%w: member %d without an address", ErrConfig, id)
	}
	for _, m := range l.st.Members() {
		if m.ID != id && transport.SameAddr(m.Addr, addr) {
			return fmt.Errorf("%w: %s is member %d's", ErrAddrInUse, addr, m.ID)
		}
	}
	return nil
}

// checkQuorumWith refuses (ErrNoQuorum) adding voter id, which has not
// run yet as far as the quorum goes, unless the voters heard from lately
// (the leader counts itself) are a quorum of the voters with it, as
// etcd's strict reconfiguration check refuses adding a voter without
// enough started members: else nothing would commit until the new node
// ran and caught up, not even a change to undo the addition.
func (l *loop) checkQuorumWith(id uint64, voters []uint64) error {
	active := 0
	for _, v := range voters {
		if _, recent := l.progressOf(v); recent || v == l.n.id {
			active++
		}
	}
	if need := (len(voters)+1)/2 + 1; active < need {
		return fmt.Errorf("%w: adding voter %d would make %d voters of which only %d were heard from lately, fewer than a quorum (%d): "+
			"bring the down members back, or add it as a learner and promote it once it caught up", ErrNoQuorum, id, len(voters)+1, active, need)
	}
	return nil
}

// checkPromotion refuses to promote learner id until it is caught up. A
// learner that has acknowledged nothing (its node never ran), or nothing
// lately, is not caught up however short the log: on a young cluster
// match 0 is within promoteSlack of the end, and promoting an absent
// learner of a one-node cluster stopped every commit. Such a learner is
// not ready (ErrLearnerNotReady: changeMembers gives up on it); one that
// is catching up is busy (changeMembers waits for it).
func (l *loop) checkPromotion(id uint64) error {
	match, active := l.progressOf(id)
	last := l.lastIndex()
	switch {
	case match == 0 && !active:
		return fmt.Errorf("%w: learner %d has not been heard from: is its node running (kvd --id %d --join), and can the leader reach %s?",
			ErrLearnerNotReady, id, id, l.n.PeerAddr(id))
	case !active:
		return fmt.Errorf("%w: learner %d has not been heard from lately (its log matches up to %d of %d)",
			ErrLearnerNotReady, id, match, last)
	case match == 0 || match+promoteSlack < last:
		// Raft counts a learner just added as recently active until the
		// leader's next quorum check; one receiving a snapshot stays so.
		return fmt.Errorf("%w: learner %d is not caught up: match %d of %d", ErrConfChangeBusy, id, match, last)
	}
	return nil
}

// checkQuorumWithout refuses (ErrNoQuorum) removing voter id while the voters
// left would not include a quorum of members heard from lately (as etcd's
// strict reconfiguration check does): with one of three voters down,
// removing another live one left two voters, one of them down, and nothing
// committed until the down one came back, not even a change to undo it.
// The leader counts itself. Just after an election no follower
// has answered yet, so the caller's retries (changeMembers, heardGrace)
// ride that out.
func (l *loop) checkQuorumWithout(id uint64, voters []uint64) error {
	rest, active := 0, 0
	for _, v := range voters {
		if v == id {
			continue
		}
		rest++
		if _, recent := l.progressOf(v); recent || v == l.n.id {
			active++
		}
	}
	if need := rest/2 + 1; active < need {
		return fmt.Errorf("%w: removing member %d would leave %d voters of which only %d were heard from lately, fewer than a quorum (%d): "+
			"bring the down members back, or remove them first", ErrNoQuorum, id, rest, active, need)
	}
	return nil
}

// progressOf is what the leader knows of id's log: how far it matches,
// and whether id was heard from lately (within an election timeout).
func (l *loop) progressOf(id uint64) (match uint64, active bool) {
	l.rn.WithProgress(func(pid uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
		if pid == id {
			match, active = pr.Match, pr.RecentActive
		}
	})
	return match, active
}

func (l *loop) lastIndex() uint64 {
	last, _ := l.st.LastIndex()
	return last
}

// isMember reports whether id is a member as this node knows the
// membership: the applied configuration, or, before the node has applied
// one (a new node before it bootstraps, or a joining node before the
// cluster sent it the log), the initial member list it was started with —
// for a joining node, the members it was told to join. A node whose
// addition is committed but not yet applied here is not yet a member: its
// messages wait (raft resends) until this node catches up.
func (n *Node) isMember(id uint64) bool {
	if n.store.NumMembers() == 0 {
		_, ok := n.cfg.InitialCluster[id]
		return ok
	}
	_, ok := n.store.Member(id)
	return ok
}

// handOff moves leadership from this node, about to be removed, to another
// voter (TransferLeadership, which gives the read lease up first), trying
// the voters in id order until one takes over; it reports the new leader.
// A removed leader would otherwise leave the cluster without one for an
// election timeout.
func (n *Node) handOff(ctx context.Context) (lead uint64, ok bool) {
	for _, m := range n.Members() {
		if m.ID == n.id || m.IsLearner {
			continue
		}
		err := n.TransferLeadership(ctx, m.ID)
		if err == nil {
			return m.ID, true
		}
		n.log.Info("handing leadership off before this node's removal", "to", m.ID, "err", err)
		if st := n.Status(); !st.IsLeader {
			return st.LeaderID, st.LeaderID != 0
		}
	}
	return 0, false
}
