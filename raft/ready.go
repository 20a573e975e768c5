package raft

import (
	"fmt"
	"slices"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/store"
)

// applyScratch is per-Ready state reused across Readies.
type applyScratch struct {
	outcomes []Outcome // the state machine's, for complete
	done     []completion
	removed  []uint64
	members  bool
	installd bool
}

type completion struct {
	p *proposal
	r result
}

func (l *loop) handleReadies() error {
	for l.rn.HasReady() && !l.n.removal.removed() {
		if err := l.handleReady(); err != nil {
			return err
		}
	}
	l.publishStatus()
	return nil
}

// handleReady follows raft's Ready contract: make the Ready's log entries,
// HardState and snapshot durable together with the effects of its
// committed entries (one Pebble batch, one fsync), then send its messages,
// then report the applied writes, then Advance. Two reorderings keep the
// fsync off the critical path of a write (see "Pipelining" in doc.go): a
// leader sends its messages before its own fsync (sendEarly), and when the
// committed entries were durable before this Ready they are reported while
// the fsync runs (applyEarly).
func (l *loop) handleReady() error {
	rd := l.rn.Ready()
	l.readyFlag = readyFlags{}
	prevTerm, prevVote := l.term, l.vote
	if rd.SoftState != nil {
		l.softState(rd.SoftState)
	}
	if rd.HardState != nil {
		l.hardState(rd.HardState)
	}
	if l.readyFlag.lostLeadership || l.readyFlag.termChanged {
		// A snapshot transfer belongs to the leadership that started it.
		l.n.peers.AbortTransfers()
	}
	u := l.st.NewUpdate()
	defer u.Close()
	sc := &l.scratch
	if err := l.installSnapshot(u, rd.Snapshot); err != nil {
		return err
	}
	if err := u.Append(rd.Entries); err != nil {
		return err
	}
	if n := len(rd.Entries); n > 0 {
		l.appendedTo = rd.Entries[n-1].GetIndex()
		l.noteRelinquish(rd.Entries)
	}
	if err := u.SetHardState(rd.HardState); err != nil {
		return err
	}
	if err := l.applyEntries(u, rd.CommittedEntries); err != nil {
		return err
	}
	sync := rd.MustSync || sc.installd
	early := l.sendEarly(rd, prevTerm, prevVote)
	if early {
		l.sendMessages(rd.Messages)
	}
	if err := l.persist(u, rd, sync, !early); err != nil {
		return err
	}
	l.reads.readStates(l, rd.ReadStates)
	l.rn.Advance(rd)
	for _, r := range l.later {
		l.report(r)
	}
	l.later = l.later[:0]
	return l.maybeSnapshot()
}

// persist commits the Ready's Update, sends its messages once it is
// durable (if send), and reports its applied writes (afterCommit). A synced
// commit whose applied entries were all durable before it reports them
// while its fsync runs (applyEarly); otherwise the report waits for the
// commit, and follows the messages so that acknowledgements do not wait
// for the region.
func (l *loop) persist(u *store.Update, rd etcdraft.Ready, sync, send bool) error {
	if !sync {
		if err := u.Commit(false); err != nil {
			return err
		}
		if send {
			l.sendMessages(rd.Messages)
		}
		l.afterCommit()
		return nil
	}
	start := time.Now()
	early := l.applyEarly(rd)
	if early {
		if err := u.CommitNoSyncWait(); err != nil {
			return err
		}
		l.afterCommit()
		if err := u.SyncWait(); err != nil {
			return err
		}
	} else if err := u.Commit(true); err != nil {
		return err
	}
	l.n.metrics.syncDuration.Observe(time.Since(start).Seconds())
	l.durable = l.lastAppended(rd)
	if send {
		l.sendMessages(rd.Messages)
	}
	if !early {
		l.afterCommit()
	}
	return nil
}

// sendEarly reports whether the Ready's messages may go out before its
// fsync. Only a leader's, and only if the Ready changes neither its term
// nor its vote: what a leader's messages promise is then either durable
// already (its term) or a fact about its log that no one acts on before
// the fsync is done. The entries a MsgApp carries count towards a commit
// only when the followers' acknowledgements are stepped, and the loop
// steps nothing until handleReady returns, after the fsync: so the leader
// never counts its own copy of an entry in a quorum before that copy is
// durable. A follower may durably hold entries its leader then loses in a
// crash; they were never committed (nor acknowledged), and the leader,
// restarted in the same term as a follower, cannot lead that term again.
// Every message of a follower or candidate (votes, acknowledgements) waits
// for the fsync, as raft's contract says.
func (l *loop) sendEarly(rd etcdraft.Ready, prevTerm, prevVote uint64) bool {
	if !l.isLeader || !etcdraft.IsEmptySnap(rd.Snapshot) || len(rd.Messages) == 0 {
		return false
	}
	return l.term == prevTerm && l.vote == prevVote
}

// applyEarly reports whether every entry the Ready commits was durable
// before the Ready: below the durable log end, and not rewritten by this
// Ready's entries (a follower can be handed a conflicting suffix and its
// commit in one Ready). Such entries cannot be lost by a crash during this
// Ready's fsync, so reporting them first keeps "the region never shows a
// write a crash could lose".
func (l *loop) applyEarly(rd etcdraft.Ready) bool {
	n := len(rd.CommittedEntries)
	if n == 0 || !etcdraft.IsEmptySnap(rd.Snapshot) {
		return false
	}
	limit := l.durable
	if len(rd.Entries) > 0 {
		limit = min(limit, rd.Entries[0].GetIndex()-1)
	}
	return rd.CommittedEntries[n-1].GetIndex() <= limit
}

// lastAppended is the log's last index once the Ready is durable.
func (l *loop) lastAppended(rd etcdraft.Ready) uint64 {
	if n := len(rd.Entries); n > 0 {
		return rd.Entries[n-1].GetIndex()
	}
	if !etcdraft.IsEmptySnap(rd.Snapshot) {
		return rd.Snapshot.GetMetadata().GetIndex()
	}
	return l.durable
}

// logLeader says at info what raft's own lines (at debug: raftLogger)
// say of the leader: which member it is now, or that there is none.
func (l *loop) logLeader(lead uint64) {
	if lead == 0 {
		l.n.log.Info("no leader", "was", l.lead)
		return
	}
	l.n.log.Info("leader elected", "leader", lead, "term", l.rn.BasicStatus().HardState.GetTerm())
}

func (l *loop) softState(ss *etcdraft.SoftState) {
	wasLeader := l.isLeader
	l.isLeader = ss.RaftState == etcdraft.StateLeader
	if ss.Lead != l.lead {
		l.logLeader(ss.Lead)
		l.lead = ss.Lead
		l.n.metrics.leaderChanges.Inc()
		l.reads.failPending(ErrLeaderChanged)
	}
	if wasLeader && !l.isLeader {
		// Stepping down ends the lease at once, before anything else.
		l.n.lease.revoke()
		l.reads.dropLease()
		l.readyFlag.lostLeadership = true
		l.sm.Lead(false)
	}
	l.readyFlag.becameLeader = !wasLeader && l.isLeader
	if l.readyFlag.becameLeader {
		l.reach.leadSince = l.now()
		l.sm.Lead(true)
	}
}

func (l *loop) hardState(hs *pb.HardState) {
	l.vote = hs.GetVote()
	if hs.GetTerm() != l.term {
		l.term = hs.GetTerm()
		l.n.lease.setTerm(l.term)
		l.reads.dropLease()
		l.readyFlag.termChanged = true
	}
	l.commit = hs.GetCommit()
}

// afterCommit runs once the Ready's batch is durable.
func (l *loop) afterCommit() {
	sc := &l.scratch
	if l.readyFlag.becameLeader || l.confProposed {
		// raft refuses a conf change until everything up to its last index
		// at election (or the previous change) is applied; mirror that so
		// proposals are refused here rather than silently turned into no-ops.
		l.confBarrier, _ = l.st.LastIndex()
		l.confProposed = false
	}
	if l.readyFlag.becameLeader {
		l.termStart, _ = l.st.LastIndex() // its term's first entry, appended in this Ready, included
	}
	if sc.installd {
		l.n.log.Info("installed snapshot from leader", "index", l.applied)
	}
	l.sm.Committed(l.applied, sc.installd)
	if sc.members || sc.installd {
		for _, m := range l.st.Members() {
			l.n.setAddr(m.ID, m.Addr)
		}
		if sc.installd {
			// A snapshot's membership may lack members this node never saw
			// removed (their removal is among the entries it replaces).
			for _, id := range l.n.peers.Known() {
				if !slices.Contains(sc.removed, id) && !l.n.isMember(id) {
					sc.removed = append(sc.removed, id)
				}
			}
		}
		for _, id := range sc.removed {
			l.n.forgetPeer(id)
		}
		if l.removed() {
			// Before the removal is acknowledged (sc.done, below).
			l.n.stopRemoved(0, true)
		}
	}
	for _, c := range sc.done {
		l.n.metrics.committed.Inc()
		c.p.finish(c.r)
	}
	clear(sc.done)
	sc.done, sc.removed, sc.members, sc.installd = sc.done[:0], sc.removed[:0], false, false
	// Proposals that did not make it into this Ready's applied entries are
	// orphaned by a change of leadership or term.
	if l.readyFlag.lostLeadership {
		l.failWaiters(ErrLeaderChanged, 0)
	} else if l.readyFlag.termChanged {
		l.failWaiters(ErrLeaderChanged, l.term)
	}
	l.reads.applied(l)
}

// installSnapshot adds a snapshot from the leader to u, with the data that
// arrived before its MsgSnap. Staged data raft did not take is dropped.
func (l *loop) installSnapshot(u *store.Update, snap *pb.Snapshot) error {
	staged := l.staged
	l.staged = nil
	var use *store.Staged
	if !etcdraft.IsEmptySnap(snap) {
		md := snap.GetMetadata()
		for _, st := range staged {
			if st.Index() == md.GetIndex() && st.Term() == md.GetTerm() {
				use = st
			}
		}
		if use == nil {
			return fmt.Errorf("raft: snapshot %d/%d accepted without its data", md.GetIndex(), md.GetTerm())
		}
		if err := u.InstallSnapshot(snap, use); err != nil {
			return err
		}
		l.applied = md.GetIndex()
		l.scratch.installd = true
	}
	for _, st := range staged {
		if st != use {
			st.Discard()
		}
	}
	return nil
}

// applyEntries adds the effects of committed entries to u: the
// membership changes the loop's, the rest the state machine's.
func (l *loop) applyEntries(u *store.Update, ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	for _, e := range ents {
		var err error
		switch e.GetType() {
		case pb.EntryConfChange:
			cc := &pb.ConfChange{}
			if err = proto.Unmarshal(e.GetData(), cc); err == nil {
				err = l.applyConfChange(u, cc, e.GetIndex())
			}
		case pb.EntryConfChangeV2:
			cc := &pb.ConfChangeV2{}
			if err = proto.Unmarshal(e.GetData(), cc); err == nil {
				err = u.SetConfState(l.rn.ApplyConfChange(cc))
			}
		}
		if err != nil {
			return fmt.Errorf("raft: applying entry %d: %w", e.GetIndex(), err)
		}
	}
	sc := &l.scratch
	var err error
	sc.outcomes, err = l.sm.Apply(u, ents, sc.outcomes[:0])
	if err != nil {
		return fmt.Errorf("raft: applying entries %d..%d: %w", ents[0].GetIndex(), ents[len(ents)-1].GetIndex(), err)
	}
	for _, o := range sc.outcomes {
		l.complete(o.Proposer, o.ReqID, result{index: o.Index, value: o.Value, err: o.Err})
	}
	clear(sc.outcomes)
	l.applied = ents[len(ents)-1].GetIndex()
	return u.SetApplied(l.applied)
}

func (l *loop) applyConfChange(u *store.Update, cc *pb.ConfChange, index uint64) error {
	mc, err := decodeMemberContext(cc.GetContext())
	if err != nil {
		l.n.log.Error("conf change with malformed context", "index", index, "err", err)
		err = nil
	}
	if leavesNoVoter(l.rn.Status().Config.Voters.IDs(), cc) {
		// Only a forged entry can (the leader refuses such a proposal:
		// ErrLastVoter), and raft panics applying it. Every node skips it
		// alike: they all apply it on the same configuration.
		l.n.log.Error("skipped a membership change that leaves no voter", "index", index,
			"change", cc.GetType().String(), "node", cc.GetNodeId())
		l.complete(mc.proposer, mc.reqID, result{index: index, err: ErrLastVoter})
		return nil
	}
	cs := l.rn.ApplyConfChange(cc)
	if err := u.SetConfState(cs); err != nil {
		return err
	}
	id, sc := cc.GetNodeId(), &l.scratch
	sc.members = true
	switch cc.GetType() {
	case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode, pb.ConfChangeUpdateNode:
		// A change that names no address (a promotion) keeps the member's
		// entry as the log made it, seen through this batch: a node that
		// applies a learner's addition and its promotion in one batch has
		// not yet copied the addition's address into its address book
		// (afterCommit), and took "" from there, on its disk, alone.
		addr := mc.addr
		if m, ok := u.Member(id); addr == "" && ok {
			addr = m.Addr
		}
		if addr == "" {
			addr = l.n.PeerAddr(id)
		}
		err = u.SetMember(store.Member{ID: id, Addr: addr, IsLearner: slices.Contains(cs.GetLearners(), id)})
	case pb.ConfChangeRemoveNode:
		sc.removed = append(sc.removed, id)
		err = u.RemoveMember(id)
	}
	l.n.log.Info("applied membership change", "index", index, "change", cc.GetType().String(), "node", id)
	l.complete(mc.proposer, mc.reqID, result{index: index})
	return err
}

// complete records the outcome for the local caller waiting on an entry.
func (l *loop) complete(proposer, reqID uint64, r result) {
	if proposer != l.n.id {
		return
	}
	if p := l.waiters[reqID]; p != nil {
		delete(l.waiters, reqID)
		l.scratch.done = append(l.scratch.done, completion{p, r})
	}
}

// sendMessages hands the Ready's messages to the peer senders; refusals are
// reported to raft after Advance.
func (l *loop) sendMessages(msgs []*pb.Message) {
	for _, m := range msgs {
		if m.GetType() == pb.MsgSnap {
			l.sendSnapshot(m)
			continue
		}
		if !l.n.peers.Send(m) {
			l.later = append(l.later, report{to: m.GetTo(), kind: reportUnreachable})
		}
	}
}

// sendSnapshot starts a snapshot transfer for m, which supersedes any
// earlier one to the same peer.
func (l *loop) sendSnapshot(m *pb.Message) {
	l.snapSeq++
	seq, to := l.snapSeq, m.GetTo()
	l.snapPending[to] = seq
	failed := report{to: to, kind: reportSnapshotFailed, seq: seq}
	if !l.isLeader || m.GetTerm() != l.term {
		// Sent before this Ready stepped down or changed term.
		l.later = append(l.later, failed)
		return
	}
	cp := l.st.Checkpoint()
	if cp == nil || cp.Index() != m.GetSnapshot().GetMetadata().GetIndex() {
		if cp != nil {
			cp.Release()
		}
		l.n.log.Error("no checkpoint for snapshot", "index", m.GetSnapshot().GetMetadata().GetIndex())
		l.later = append(l.later, failed)
		return
	}
	if !l.n.peers.SendSnapshot(m, cp, seq) {
		cp.Release()
		l.later = append(l.later, failed)
	}
}

// maybeSnapshot takes a snapshot every SnapshotCount applied entries and
// compacts the log behind it, keeping SnapshotCatchUpEntries.
func (l *loop) maybeSnapshot() error {
	snap, _ := l.st.Snapshot()
	last := snap.GetMetadata().GetIndex()
	if l.applied < last+l.cfg.SnapshotCount {
		return nil
	}
	var compactTo uint64
	if l.applied > l.cfg.SnapshotCatchUpEntries {
		compactTo = l.applied - l.cfg.SnapshotCatchUpEntries
	}
	if _, err := l.st.CreateSnapshot(compactTo); err != nil {
		return err
	}
	l.n.log.Debug("snapshot taken", "index", l.applied, "compacted_to", compactTo)
	return nil
}

// leavesNoVoter reports whether applying cc to a configuration whose voters
// are voters would leave none.
func leavesNoVoter(voters map[uint64]struct{}, cc *pb.ConfChange) bool {
	n := len(voters)
	_, isVoter := voters[cc.GetNodeId()]
	switch cc.GetType() {
	case pb.ConfChangeAddNode:
		if !isVoter {
			n++
		}
	case pb.ConfChangeRemoveNode, pb.ConfChangeAddLearnerNode:
		if isVoter {
			n--
		}
	}
	return n == 0
}
