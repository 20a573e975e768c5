package raft

import (
	"errors"
	"fmt"
	"sort"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/store"
)

// maxDrain bounds how much queued work one loop iteration takes before it
// handles a Ready, so proposals arriving together share one Ready (and one
// fsync) without starving ticks.
const maxDrain = 4096

// inbound is a message from a peer; a MsgSnap comes with its staged data.
type inbound struct {
	msg    *pb.Message
	staged *store.Staged
}

type reportKind uint8

const (
	reportUnreachable reportKind = iota
	reportSnapshotDone
	reportSnapshotFailed
)

// report is a peer sender's feedback for raft. A snapshot outcome names
// the transfer by the seq the loop gave it.
type report struct {
	to   uint64
	kind reportKind
	seq  uint64
}

// loop owns the RawNode and everything only the raft goroutine touches.
type loop struct {
	n   *Node
	rn  *etcdraft.RawNode
	st  *store.Store
	sm  StateMachine
	cfg Config

	now       func() time.Time // the clock of ticks and leases (Knobs.Clock)
	nextTick  time.Time
	ticks     uint64    // ticks taken, for request ages
	voteGrace time.Time // vote requests are ignored until then (restart)

	lead, term, commit, applied uint64
	vote                        uint64 // the HardState's vote
	termStart                   uint64 // as leader: the last index once its term's first entry was appended
	durable                     uint64 // the log's last index known durable (see applyEarly)
	appendedTo                  uint64 // the last index a Ready appended (batchHeld)
	isLeader                    bool

	waiters      map[uint64]*proposal // by request id
	confBarrier  uint64               // no conf change until applied >= this
	confProposed bool                 // a conf change entered the log this Ready

	batch      []*proposal // commands waiting to be proposed together
	batchBytes int

	reads     readTracker
	staged    []*store.Staged // snapshot data that came with stepped MsgSnaps
	later     []report        // raft feedback held until after Advance
	scratch   applyScratch
	readyFlag readyFlags

	// snapPending maps a peer to the seq of the latest snapshot transfer
	// sent to it whose outcome raft has not been told; snapSeq numbers them.
	snapPending map[uint64]uint64
	snapSeq     uint64

	transfer     *transferRequest // a leader transfer under way (transfer.go)
	relinquished relinquish       // the latest relinquish marker appended
	reach        reach            // when each member was last heard from (reach.go)
}

// readyFlags are facts about the Ready being handled.
type readyFlags struct {
	becameLeader, lostLeadership, termChanged bool
}

func newLoop(n *Node) (*loop, error) {
	st := n.store
	hs, _, _ := st.InitialState()
	if t := hs.GetTerm(); t > maxPeerTerm {
		return nil, fmt.Errorf("%w: term %d in %s exceeds %d", ErrTermOverflow, t, n.cfg.DataDir, uint64(maxPeerTerm))
	}
	last, _ := st.LastIndex()
	fresh := etcdraft.IsEmptyHardState(hs) && last == 0
	rc := &etcdraft.Config{
		ID:                        n.id,
		ElectionTick:              n.cfg.ElectionTicks,
		HeartbeatTick:             n.cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   st.Applied(),
		MaxSizePerMsg:             n.cfg.MaxSizePerMsg,
		MaxCommittedSizePerReady:  n.cfg.MaxApplyBytes,
		MaxUncommittedEntriesSize: n.cfg.MaxUncommittedBytes,
		MaxInflightMsgs:           n.cfg.MaxInflightMsgs,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            etcdraft.ReadOnlySafe,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{n.log},
	}
	rn, err := etcdraft.NewRawNode(rc)
	if err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	if fresh && !n.cfg.Join {
		if err := rn.Bootstrap(bootstrapPeers(n.cfg.InitialCluster)); err != nil {
			return nil, fmt.Errorf("raft: bootstrap: %w", err)
		}
	}
	l := &loop{
		n: n, rn: rn, st: st, sm: n.cfg.StateMachine, cfg: n.cfg,
		now:     n.cfg.clock(),
		term:    hs.GetTerm(),
		vote:    hs.GetVote(),
		durable: last,
		commit:  hs.GetCommit(),
		applied: st.Applied(),
		waiters: make(map[uint64]*proposal),
		reads:   newReadTracker(),

		snapPending: make(map[uint64]uint64),
	}
	l.startClock(!fresh) // a restarted node starts with a vote grace
	env := Env{ID: n.id, Store: st, ElectionTimeout: n.cfg.electionTimeout(), Logger: n.log}
	if err := l.sm.Open(env); err != nil {
		return nil, fmt.Errorf("raft: opening the state machine: %w", err)
	}
	return l, nil
}

func bootstrapPeers(peers map[uint64]string) []etcdraft.Peer {
	out := make([]etcdraft.Peer, 0, len(peers))
	for id, addr := range peers {
		out = append(out, etcdraft.Peer{ID: id, Context: appendMemberContext(nil, memberContext{addr: addr})})
	}
	// Every initial member must write the same bootstrap entries.
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// run is the raft loop: wait for work, take a tick if due, handle the work
// and whatever else is queued, then handle the resulting Readies. Each arm
// is a method a test harness calls as run does (harness_test.go), so that
// it drives this loop's order of work rather than a copy of it.
func (l *loop) run() {
	defer close(l.n.donec)
	defer l.shutdown()
	timer := time.NewTimer(l.untilTick())
	defer timer.Stop()
	for {
		select {
		case <-l.n.stopc:
			return
		case <-l.n.removal.stopc: // removal.go
			return
		case p := <-l.n.propc:
			l.takeProposal(p)
		case in := <-l.n.recvc:
			l.step(in)
		case r := <-l.n.reportc:
			l.takeReport(r)
		case r := <-l.n.readc:
			l.takeRead(r)
		case <-timer.C:
			l.tick()
		case r := <-l.n.transferc:
			l.takeTransfer(r)
		case f := <-l.n.freezeRequests():
			if !l.freeze(f) {
				return
			}
		}
		if !l.settle() || l.n.removal.removed() {
			return
		}
		timer.Reset(l.untilTick())
	}
}

// untilTick is how long the loop may wait before its next tick is due.
func (l *loop) untilTick() time.Duration { return l.nextTick.Sub(l.now()) }

// The arms of the loop's select: due ticks are taken before the work, so
// that the work sees raft's clock up to date (see step).
func (l *loop) takeProposal(p *proposal) { l.tick(); l.propose(p) }
func (l *loop) takeReport(r report)      { l.tick(); l.report(r) }
func (l *loop) takeRead(r *readRequest)  { l.tick(); l.reads.add(l, r) }

// settle ends an iteration of the loop: it takes whatever else is queued,
// proposes the batch, sends the reads, and handles the resulting Readies.
// It reports false if the loop must stop (a storage failure).
func (l *loop) settle() bool {
	l.drain()
	l.advanceTransfer()
	l.maybeFlush()
	l.reads.flush(l)
	if err := l.handleReadies(); err != nil {
		l.failStorage(err) // storage.go
		return false
	}
	for l.maybeFlush() { // the Readies committed the batch it held
		if err := l.handleReadies(); err != nil {
			l.failStorage(err)
			return false
		}
	}
	return true
}

func (l *loop) drain() {
	for range maxDrain {
		// Proposals first, one channel at a time: under load most of
		// what is queued is proposals, and a select over every channel
		// locks them all for each one taken.
		select {
		case p := <-l.n.propc:
			l.propose(p)
			continue
		default:
		}
		select {
		case p := <-l.n.propc:
			l.propose(p)
		case in := <-l.n.recvc:
			l.step(in)
		case r := <-l.n.reportc:
			l.report(r)
		case r := <-l.n.readc:
			l.reads.add(l, r)
		default:
			return
		}
	}
}

// tick advances raft's clock by the ticks due. After a stall it takes at
// most an election timeout's worth at once: counting fewer ticks than real
// time is the safe direction for every timeout raft derives from them.
func (l *loop) tick() {
	now := l.now()
	if now.Before(l.nextTick) {
		return
	}
	for n := 0; !now.Before(l.nextTick) && n <= l.cfg.ElectionTicks; n++ {
		l.rn.Tick()
		l.ticks++
		l.nextTick = l.nextTick.Add(l.cfg.TickInterval)
	}
	if l.isLeader {
		l.sm.Tick(l.proposeOwn) // the state machine's timers (TTL leases): once per tick taken
	}
	if !now.Before(l.nextTick) {
		l.nextTick = now.Add(l.cfg.TickInterval)
	}
	l.reads.onTick(l, now)
	l.observePeers(now)
}

// step hands a peer's message to raft. Due ticks are taken first, so no
// tick that fell due before a heartbeat was stepped is counted after it:
// the lease argument counts only ticks after the last heartbeat.
func (l *loop) step(in inbound) {
	l.tick()
	if !l.admit(in) { // what the message claims about the log (filter_loop.go)
		if in.staged != nil {
			in.staged.Discard() // data of a snapshot raft will never see
		}
		return
	}
	t := in.msg.GetType()
	if l.inVoteGrace(t) {
		if in.staged != nil {
			in.staged.Discard()
		}
		return
	}
	l.reach.heard(in.msg.GetFrom(), l.now())
	l.noteLostLog(in.msg)
	var commit uint64
	if in.staged != nil {
		commit = l.rn.BasicStatus().HardState.GetCommit()
	}
	if err := l.rn.Step(in.msg); err != nil {
		l.n.log.Debug("raft step failed", "type", t.String(), "from", in.msg.GetFrom(), "err", err)
	}
	if in.staged != nil {
		l.keepStaged(in, commit)
	}
}

// keepStaged keeps a snapshot's data for installSnapshot only if raft took
// its MsgSnap, which moves the commit index from below the snapshot's to
// it: data of a MsgSnap raft ignored (a stale term, say) matching the one
// it took would otherwise be installed under the other's name, the last
// matching one winning, and a peer at a stale term could have its data
// installed in place of the leader's.
func (l *loop) keepStaged(in inbound, commitBefore uint64) {
	idx := in.msg.GetSnapshot().GetMetadata().GetIndex()
	if commitBefore < idx && l.rn.BasicStatus().HardState.GetCommit() == idx {
		l.staged = append(l.staged, in.staged)
		return
	}
	in.staged.Discard()
}

func (l *loop) report(r report) {
	switch r.kind {
	case reportSnapshotDone, reportSnapshotFailed:
		// raft tracks one pending snapshot per follower, the latest sent:
		// the outcome of an earlier transfer (aborted when the new one was
		// queued) would be taken for the new one's, and a failure would
		// make raft send yet another snapshot, aborting the new one.
		if l.snapPending[r.to] != r.seq {
			l.n.log.Debug("outcome of a superseded snapshot transfer ignored", "peer", r.to)
			return
		}
		delete(l.snapPending, r.to)
	}
	switch r.kind {
	case reportUnreachable:
		l.rn.ReportUnreachable(r.to)
	case reportSnapshotDone:
		l.rn.ReportSnapshot(r.to, etcdraft.SnapshotFinish)
	case reportSnapshotFailed:
		l.rn.ReportUnreachable(r.to)
		l.rn.ReportSnapshot(r.to, etcdraft.SnapshotFailure)
	}
}

func proposeErr(err error) error {
	if errors.Is(err, etcdraft.ErrProposalDropped) {
		return ErrProposalDropped
	}
	return err
}

// failWaiters fails the proposals proposed before term (all if 0).
func (l *loop) failWaiters(err error, before uint64) {
	for id, p := range l.waiters {
		if before == 0 || p.term < before {
			delete(l.waiters, id)
			l.n.metrics.failed.Inc()
			p.finish(result{err: err})
		}
	}
}

func (l *loop) shutdown() {
	err := l.n.stoppedErr()
	if l.n.removal.removed() {
		err = &RemovedError{ID: l.n.id}
	}
	for _, p := range l.batch {
		p.finish(result{err: err})
	}
	l.batch = nil
	l.failWaiters(err, 0)
	l.reads.failAll(err)
	for _, st := range l.staged {
		st.Discard()
	}
	l.staged = nil
	l.n.lease.revoke()
}

// removed reports whether this node has applied its own removal (its
// tombstone, store.Member.Removed). No leader talks to it after that (its
// peers refuse its sessions), yet etcd raft keeps naming the last leader
// it knew: a node outside the configuration never campaigns, so it never
// pre-votes, which is what clears an isolated voter's leader. Status
// reports no leader then, so that whatever waits for a leader's news (a
// watch, the region's leader hint, /healthz) goes elsewhere instead of
// waiting forever. A joining node replaying the log from before
// its own addition is not in its address book either, but has no
// tombstone.
func (l *loop) removed() bool {
	return l.st.Removed(l.n.id)
}

func (l *loop) publishStatus() {
	st := Status{
		ID: l.n.id, LeaderID: l.lead, Term: l.term, Commit: l.commit, Applied: l.applied, IsLeader: l.isLeader,
		LeaderReady: l.leaderReady(),
	}
	if l.removed() {
		st.LeaderID = 0
	}
	l.n.statusMu.Lock()
	l.n.status = st
	l.n.statusMu.Unlock()
	m := l.n.metrics
	m.term.Set(float64(st.Term))
	m.leaderID.Set(float64(st.LeaderID))
	m.isLeader.Set(boolGauge(st.IsLeader))
	m.commit.Set(float64(st.Commit))
	m.applied.Set(float64(st.Applied))
	m.leaseValid.Set(boolGauge(st.IsLeader && l.n.lease.valid()))
}
