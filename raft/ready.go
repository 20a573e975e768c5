package raft

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/raft/internal/store"
)

// applyScratch is per-Ready state reused across Readies.
type applyScratch struct {
	applies  []Write
	deliver  []Write
	events   []Write // every write of the batch, for an EventApplier
	eventsAt uint64  // the applied index an EventApplier was last told of
	skip     []bool
	order    []int
	done     []completion
	removed  []uint64
	members  bool
	installd bool
	atomic   bool // an entry wrote several keys: the Apply call is atomic

	// TTL leases (leasecmd.go): grants and revokes applied in the batch,
	// key counts changed, the net change in the number of leases, and the
	// grants alone.
	leaseOps   []leaseOp
	leaseKeys  []leaseKeys
	leaseDelta int
	grants     int
}

type completion struct {
	p *proposal
	r result
}

func (l *loop) handleReadies() error {
	for l.rn.HasReady() {
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
	}
	if err := u.SetHardState(rd.HardState); err != nil {
		return err
	}
	if err := l.applyEntries(u, rd.CommittedEntries); err != nil {
		return err
	}
	if len(sc.applies) > 0 { // Apply is called exactly then (deliverApplies)
		if a, ok := l.cfg.Applier.(AheadApplier); ok {
			a.BatchAhead()
		}
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

func (l *loop) softState(ss *etcdraft.SoftState) {
	wasLeader := l.isLeader
	l.isLeader = ss.RaftState == etcdraft.StateLeader
	if ss.Lead != l.lead {
		l.lead = ss.Lead
		l.n.metrics.leaderChanges.Inc()
		l.reads.failPending(ErrLeaderChanged)
	}
	if wasLeader && !l.isLeader {
		// Stepping down ends the lease at once, before anything else.
		l.n.lease.revoke()
		l.reads.dropLease()
		l.readyFlag.lostLeadership = true
		l.n.leases.demote()
	}
	l.readyFlag.becameLeader = !wasLeader && l.isLeader
	if l.readyFlag.becameLeader {
		l.n.leases.promote(l.n.leaseNow()) // every TTL lease starts over, at full TTL
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
	l.takeEvents()
	l.deliverApplies()
	l.mirrorLeases()
	l.deliverEvents()
	if sc.installd {
		l.n.log.Info("installed snapshot from leader", "index", l.applied)
		if err := l.reloadLeases(); err != nil {
			l.n.log.Error("reloading leases after snapshot install", "err", err)
		}
		if a := l.cfg.Applier; a != nil {
			a.Restore()
		}
	}
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

// applyEntries adds the effects of committed entries to u.
func (l *loop) applyEntries(u *store.Update, ents []*pb.Entry) error {
	for _, e := range ents {
		var err error
		switch e.GetType() {
		case pb.EntryNormal:
			err = l.applyCommand(u, e)
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
	if len(ents) == 0 {
		return nil
	}
	l.applied = ents[len(ents)-1].GetIndex()
	return u.SetApplied(l.applied)
}

func (l *loop) applyCommand(u *store.Update, e *pb.Entry) error {
	if len(e.GetData()) == 0 {
		return nil // a new leader's empty entry
	}
	c, err := decodeCommand(e.GetData())
	if err != nil {
		// Every node skips it the same way; failing would wedge the group.
		l.n.log.Error("skipping malformed command", "index", e.GetIndex(), "err", err)
		return nil
	}
	switch c.op {
	case opTxn:
		return l.applyTxn(u, e.GetIndex(), c)
	case opLeaseGrant, opLeaseRevoke:
		return l.applyLeaseCommand(u, e.GetIndex(), c)
	}
	r := result{version: e.GetIndex()}
	if c.op == opPut {
		err = u.Put(c.key, c.value, r.version)
	} else {
		r.existed, err = u.Delete(c.key)
	}
	if err == nil {
		err = l.leaseWrite(u, c.key, 0, c.op == opDelete) // a plain PUT detaches, as in etcd
	}
	if err != nil {
		return err
	}
	sc := &l.scratch
	sc.applies = append(sc.applies, Write{Version: r.version, Key: c.key, Value: c.value, Deleted: c.op == opDelete,
		absent: c.op == opDelete && !r.existed})
	l.complete(c.proposer, c.reqID, r)
	return nil
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
		l.complete(mc.proposer, mc.reqID, result{version: index, err: ErrLastVoter})
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
	l.complete(mc.proposer, mc.reqID, result{version: index})
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

// deliverApplies reports the batch's writes to the Applier in one call: in
// log order, one Write per key with the key's final state in the batch. Collapsing
// repeats keeps a cache rebuilt concurrently (see ForEach) from ever going
// backwards when these calls are replayed over it. A call whose collapsing
// moved a key's state past another key's write is marked Atomic, so that
// every state a lock-free reader can see mid-call is one some index had.
func (l *loop) deliverApplies() {
	sc := &l.scratch
	defer func() {
		clear(sc.applies)
		sc.applies, sc.atomic = sc.applies[:0], false
	}()
	a := l.cfg.Applier
	if a == nil || len(sc.applies) == 0 {
		return
	}
	ops := sc.applies
	sc.skip = slices.Grow(sc.skip[:0], len(ops))[:len(ops)]
	clear(sc.skip)
	if len(ops) > 1 {
		sc.order = sc.order[:0]
		for i := range ops {
			sc.order = append(sc.order, i)
		}
		slices.SortStableFunc(sc.order, func(i, j int) int { return bytes.Compare(ops[i].Key, ops[j].Key) })
		for k := 0; k+1 < len(sc.order); k++ {
			if i, j := sc.order[k], sc.order[k+1]; bytes.Equal(ops[i].Key, ops[j].Key) {
				sc.skip[i] = true
				// The key's state now arrives at j's place: any other
				// key's write between i and j would be seen before the
				// write at i that preceded it in the log, a state no
				// index had (a reader of both keys, one after the other,
				// could see the later write and not the earlier one). So
				// the call goes out atomic then.
				if j != i+1 {
					sc.atomic = true
				}
			}
		}
	}
	sc.deliver = sc.deliver[:0]
	for i, op := range ops {
		if !sc.skip[i] {
			op.Atomic = sc.atomic
			sc.deliver = append(sc.deliver, op)
		}
	}
	a.Apply(sc.deliver)
	clear(sc.deliver)
}

// takeEvents keeps the batch's writes for an EventApplier (see
// EventApplier) before deliverApplies collapses them.
func (l *loop) takeEvents() {
	sc := &l.scratch
	sc.events = sc.events[:0]
	if _, ok := l.cfg.Applier.(EventApplier); !ok {
		return
	}
	for _, w := range sc.applies {
		if !w.absent {
			sc.events = append(sc.events, w)
		}
	}
}

// deliverEvents tells an EventApplier the batch's writes, after its Apply
// call, if the applied index moved.
func (l *loop) deliverEvents() {
	ea, ok := l.cfg.Applier.(EventApplier)
	sc := &l.scratch
	if !ok || l.applied == sc.eventsAt {
		return
	}
	sc.eventsAt = l.applied
	if sc.installd {
		ea.Events(nil, l.applied, true)
	} else {
		ea.Events(sc.events, l.applied, false)
	}
	clear(sc.events)
	sc.events = sc.events[:0]
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
