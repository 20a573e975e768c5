package raft

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/errs"
)

// Leader transfer (etcd's MoveLeader). raft's transfer makes the target
// campaign at once (MsgTimeoutNow), and the other voters grant its vote
// (its context says "CampaignTransfer") although they heard from the
// leader within an election timeout: the very vote suppression the read
// lease rests on (see "The lease" in doc.go). So the leader gives the
// lease up first, and proves it did in the log:
//
//  1. it stops extending its read lease and publishes its end, then waits
//     until the last expiry it published has passed on its clock, so no
//     client counts on it any more;
//  2. it appends a relinquish marker: an empty normal entry of its term
//     that is not the term's first (raft's own empty entry at election is
//     the first; nothing else appends empty entries), and once a quorum
//     has it, calls raft's TransferLeader;
//  3. a node steps a MsgTimeoutNow only from its leader in the current
//     term T, and it and a transfer vote for term T+1 only if its log holds
//     term T's marker (filter_loop.go): only the leader of term T appends
//     term T entries, so a member cannot force an election in a leader's
//     lease by claiming a transfer.
//
// A leader that appended its term's marker takes no read lease again in
// that term: if the transfer fails, it leads on without one (reads go by
// ReadIndex) until the next election.

// Transfer errors.
var (
	// ErrTransferTarget: the target is not a voter (a learner, or not a
	// member).
	ErrTransferTarget = errs.Classed(errs.ErrBadRequest, "raft: leadership can only move to a voter")
	// ErrTransferBusy: a transfer is already under way on this leader.
	ErrTransferBusy = errs.Classed(errs.ErrBadRequest, "raft: a leadership transfer is already in progress")
	// ErrTransferFailed: the target did not take over (it is unreachable,
	// or did not catch up or win the election in time). The node that
	// tried may still lead, or another may.
	ErrTransferFailed = errors.New("raft: leadership transfer failed")
)

// transferRequest asks the loop to hand leadership to to; done gets nil
// once this node stopped leading, else why it could not.
type transferRequest struct {
	to   uint64
	done chan error // buffered

	// The loop's state of the transfer.
	term      uint64
	notBefore time.Time // the last read lease published ends then
	marked    bool      // the relinquish marker was proposed
	started   bool      // raft's TransferLeader was called
	giveUp    uint64    // the loop's tick count at which it fails
}

// relinquish is a relinquish marker this node has in its log: the term and
// index of the latest it appended.
type relinquish struct{ term, index uint64 }

// TransferLeadership makes voter to the leader, as etcd's MoveLeader: it
// returns once to leads (nil), or with why not. Call it on the leader;
// elsewhere it is a *NotLeaderError. to being this node is a no-op.
// While it runs the node serves no read lease, and for the short while
// the target campaigns, proposals are dropped (ErrProposalDropped, safe to
// retry).
func (n *Node) TransferLeadership(ctx context.Context, to uint64) error {
	if st := n.Status(); !st.IsLeader {
		return n.notLeader(st.LeaderID)
	}
	if to == n.id {
		return nil
	}
	r := &transferRequest{to: to, done: make(chan error, 1)}
	select {
	case n.transferc <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return n.stoppedErr()
	}
	select {
	case err := <-r.done:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return n.stoppedErr()
	}
	// This node stepped down: wait until the target is known to lead.
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		lead := n.Status().LeaderID
		if lead == to {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("%w: this node stepped down, but member %d is not known to lead (leader now: %d): %w",
				ErrTransferFailed, to, lead, ctx.Err())
		case <-n.donec:
			return n.stoppedErr()
		}
	}
}

// takeTransfer is the loop's arm for a TransferLeadership call: it checks
// the target and starts giving the lease up (step 1).
func (l *loop) takeTransfer(r *transferRequest) {
	l.tick()
	cs := l.st.ConfState()
	_, active := l.progressOf(r.to)
	var err error
	switch {
	case !l.isLeader:
		err = l.n.notLeader(l.lead)
	case l.transfer != nil:
		err = fmt.Errorf("%w (to member %d)", ErrTransferBusy, l.transfer.to)
	case slices.Contains(cs.GetLearners(), r.to):
		err = fmt.Errorf("%w: member %d is a learner (promote it first)", ErrTransferTarget, r.to)
	case !slices.Contains(cs.GetVoters(), r.to):
		err = fmt.Errorf("%w: member %d does not exist", ErrTransferTarget, r.to)
	case !active:
		err = fmt.Errorf("%w: member %d has not been heard from lately", ErrTransferFailed, r.to)
	}
	if err != nil {
		r.done <- err
		return
	}
	_, _, expiry := l.n.lease.state()
	l.n.lease.revoke()
	l.reads.dropLease()
	r.term, r.notBefore = l.term, expiry
	// The lease's rest, the marker's commit, then raft's own transfer
	// timeout (an election timeout), with room to spare.
	r.giveUp = l.ticks + uint64(l.cfg.leaseDuration()/l.cfg.TickInterval) + 4*uint64(l.cfg.ElectionTicks)
	l.transfer = r
	l.n.log.Info("moving leadership: giving up the read lease first", "to", r.to, "lease_until", expiry)
}

// leasing reports whether the leader may extend its read lease: not while
// it moves leadership, nor in a term it appended a relinquish marker in.
func (l *loop) leasing() bool {
	return l.isLeader && l.transfer == nil && l.relinquished.term != l.term
}

// advanceTransfer moves a transfer on (steps 2 and 3 on the leader's side);
// the loop calls it each iteration while there is one.
func (l *loop) advanceTransfer() {
	r := l.transfer
	if r == nil {
		return
	}
	// raft's own state: a vote stepped in this iteration may have made
	// this node step down before a Ready tells the loop.
	bs := l.rn.BasicStatus()
	switch {
	case bs.RaftState != etcdraft.StateLeader || bs.GetTerm() != r.term:
		l.finishTransfer(nil) // TransferLeadership waits to see who leads
	case l.ticks > r.giveUp:
		l.finishTransfer(fmt.Errorf("%w: member %d did not take over in time", ErrTransferFailed, r.to))
	case !r.marked && !l.now().Before(r.notBefore):
		if err := l.rn.Propose(nil); err != nil { // the marker (an empty entry)
			l.finishTransfer(fmt.Errorf("%w: %w", ErrTransferFailed, proposeErr(err)))
			return
		}
		r.marked = true
	case r.marked && !r.started && l.relinquished.term == l.term && l.commit >= l.relinquished.index:
		l.rn.TransferLeader(r.to)
		r.started = true
	case r.started && bs.LeadTransferee != r.to:
		// raft gave up: the target did not catch up or campaign within an
		// election timeout.
		l.finishTransfer(fmt.Errorf("%w: member %d did not take over within an election timeout", ErrTransferFailed, r.to))
	}
}

func (l *loop) finishTransfer(err error) {
	if err != nil {
		l.n.log.Warn("moving leadership failed", "to", l.transfer.to, "err", err)
	}
	l.transfer.done <- err
	l.transfer = nil
}

// noteRelinquish records the relinquish markers among ents, which this
// Ready appends to the log.
func (l *loop) noteRelinquish(ents []*pb.Entry) {
	for i, e := range ents {
		if e.GetType() != pb.EntryNormal || len(e.GetData()) != 0 {
			continue
		}
		var prev uint64
		var err error
		if i > 0 {
			prev = ents[i-1].GetTerm()
		} else {
			prev, err = l.st.Term(e.GetIndex() - 1)
		}
		if err == nil && prev == e.GetTerm() { // not its term's first entry
			l.relinquished = relinquish{term: e.GetTerm(), index: e.GetIndex()}
		}
	}
}

// admitTransfer is the loop's check of the messages of a leader transfer
// from peers (step 3): MsgTimeoutNow only from the leader of the current
// term, and a transfer vote only once the previous term's leader gave its
// lease up in this node's log. It returns why to drop m, or nil.
func (l *loop) admitTransfer(m *pb.Message) error {
	switch {
	case m.GetType() == pb.MsgTimeoutNow:
		// The leader sends it once this node's log matches its own, the
		// term's marker included.
		if m.GetFrom() != l.lead || m.GetTerm() != l.term || l.lead == 0 || l.relinquished.term != l.term {
			return fmt.Errorf("MsgTimeoutNow from %d at term %d; the leader is %d at term %d, the last lease given up here was term %d's",
				m.GetFrom(), m.GetTerm(), l.lead, l.term, l.relinquished.term)
		}
	case m.GetType() == pb.MsgVote && len(m.GetContext()) != 0:
		if m.GetTerm() != l.relinquished.term+1 {
			return fmt.Errorf("transfer vote for term %d; the last lease given up here was term %d's", m.GetTerm(), l.relinquished.term)
		}
	}
	return nil
}
