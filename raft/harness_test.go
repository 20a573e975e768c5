package raft

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// The scenario harness drives real nodes deterministically, on the test's
// goroutine: each node is a Node built by open (Open without its
// goroutine) on an in-memory Pebble (vfs.NewMem), with a fake clock
// (Knobs.Clock) and a simulated network in place of raft/peer (simPeers,
// a peerNetwork). The harness runs one iteration of the node's loop at a
// time, as run does: it queues the work on the node's own channel, calls
// the select arm that takes it (step, takeProposal, takeRead, takeReport,
// tick) and then settle, which drains the queue, proposes, and handles
// the Readies (ready.go, with its pipelining) exactly as in production.
// Only one channel holds work during an iteration, so drain's select has
// a single choice and the run is deterministic.

// scenarioEpoch is what every fake clock reads at real time 0. It lies in
// the past, so a check of the real clock against a fake time never holds.
var scenarioEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeClock is a node's monotonic clock: piecewise linear in real time.
type fakeClock struct{ segs []clockSeg }

type clockSeg struct {
	real, local time.Duration
	rate        float64
}

func (c *fakeClock) at(real time.Duration) time.Duration {
	s := c.segs[0]
	for _, x := range c.segs[1:] {
		if x.real <= real {
			s = x
		}
	}
	return s.local + time.Duration(math.Floor(float64(real-s.real)*s.rate))
}

// realAt is the first real time at which the clock reads local or later.
func (c *fakeClock) realAt(local time.Duration) time.Duration {
	s := c.segs[0]
	for _, x := range c.segs[1:] {
		if x.local <= local {
			s = x
		}
	}
	t := s.real + time.Duration(math.Ceil(float64(local-s.local)/s.rate))
	for c.at(t) < local {
		t++
	}
	for t > s.real && c.at(t-1) >= local {
		t--
	}
	return t
}

func (c *fakeClock) setRate(real time.Duration, rate float64) {
	c.segs = append(c.segs, clockSeg{real: real, local: c.at(real), rate: rate})
}

// flight is a message on the simulated network; a MsgSnap carries the
// checkpoint its sender streams.
type flight struct {
	m    *pb.Message
	at   time.Duration // deliverable from then
	snap *snapFlight
}

type snapFlight struct {
	cp  *store.Checkpoint
	seq uint64
}

// simPeers is a node's peer layer on the harness's network: what it sends
// is queued as a flight (lost at once over a cut link), and snapshot
// transfers travel whole, their outcome reported back to the sender when
// they are delivered or lost.
type simPeers struct {
	h       *scenarioHarness
	id      uint64
	cluster uint64
	known   map[uint64]bool
}

func (p *simPeers) Send(m *pb.Message) bool {
	p.known[m.GetTo()] = true
	p.h.send(m, nil)
	return true
}

func (p *simPeers) SendSnapshot(m *pb.Message, cp *store.Checkpoint, seq uint64) bool {
	p.known[m.GetTo()] = true
	p.h.send(m, &snapFlight{cp: cp, seq: seq})
	return true
}

// AbortTransfers loses the snapshots this node has in flight, as the peer
// layer aborts them; raft, which started them, learns of no outcome (its
// term or leadership changed).
func (p *simPeers) AbortTransfers() {
	keep := p.h.net[:0]
	for _, f := range p.h.net {
		if f.snap != nil && f.m.GetFrom() == p.id {
			f.snap.cp.Release()
			continue
		}
		keep = append(keep, f)
	}
	p.h.net = keep
}

func (p *simPeers) Known() []uint64 {
	out := make([]uint64, 0, len(p.known))
	for id := range p.known {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (p *simPeers) Remove(id uint64, _ string)                { delete(p.known, id) }
func (p *simPeers) FarewellDone(context.Context, uint64) bool { return false }
func (p *simPeers) Serve(transport.Conn, []byte)              { panic("simPeers: no connections") }
func (p *simPeers) ClusterID() uint64                         { return p.cluster }
func (p *simPeers) Close()                                    {}

func (h *scenarioHarness) addr(id uint64) string        { return fmt.Sprintf("10.0.0.%d:7000", id) }
func (h *scenarioHarness) node(id uint64) *scenarioNode { return h.nodes[id-1] }

// local is n's clock now, as a duration since scenarioEpoch.
func (n *scenarioNode) local() time.Duration { return n.clock.at(n.h.now) }
func (n *scenarioNode) now() time.Time       { return scenarioEpoch.Add(n.local()) }

// nextTickReal is when, in real time, n's next tick falls due.
func (n *scenarioNode) nextTickReal() time.Duration {
	return n.clock.realAt(n.l.nextTick.Sub(scenarioEpoch))
}

// tickDue reports whether n's loop timer has fired.
func (n *scenarioNode) tickDue() bool { return !n.frozen && !n.now().Before(n.l.nextTick) }

// open starts n's node on its file system and clock, as Open does but
// without the loop's goroutine, and handles what its first iteration
// would (a bootstrap's entries).
func (h *scenarioHarness) open(n *scenarioNode, join bool) {
	h.on(n)
	cfg := h.cfg
	cfg.ID, cfg.Addr, cfg.Join = n.id, h.addr(n.id), join
	cfg.DataDir, cfg.FS = "data", n.fs
	cfg.Transport = h.mem.endpoint(cfg.Addr) // never dialled: simPeers carries the traffic
	cfg.InitialCluster = make(map[uint64]string)
	for _, o := range h.nodes {
		if o.id <= h.initial || (join && o != n) {
			cfg.InitialCluster[o.id] = h.addr(o.id)
		}
	}
	cfg.StateMachine = &scenarioSM{n: n}
	cfg.OnLease = func(term uint64, exp time.Time) { h.published(n, term, exp) }
	cfg.Knobs.Clock = n.now
	node, lp, err := open(cfg, func(_ *Node, cluster uint64) (peerNetwork, error) {
		return &simPeers{h: h, id: n.id, cluster: cluster, known: make(map[uint64]bool)}, nil
	})
	if err != nil {
		h.t.Fatalf("n%d: open: %v", n.id, err)
	}
	n.node, n.l = node, lp
	st := lp.rn.BasicStatus()
	n.state, n.term = st.RaftState, st.GetTerm()
	h.iterate(n, func() {})
}

// crash stops n as a killed process stops: no shutdown of the loop (its
// lease is not revoked, its callers not failed), the store closed with
// what it holds. Messages on their way to it are lost with its connections.
func (h *scenarioHarness) crash(n *scenarioNode) {
	keep := h.net[:0]
	for _, f := range h.net {
		if f.m.GetTo() != n.id {
			keep = append(keep, f)
		} else if f.snap != nil {
			h.lostSnapshot(f)
		}
	}
	h.net = keep
	close(n.node.donec) // the loop never ran on a goroutine: Close must not wait for it
	if err := n.node.Close(); err != nil {
		h.t.Fatalf("n%d: close: %v", n.id, err)
	}
	n.props, n.frozen = nil, false
	h.reads = slices.DeleteFunc(h.reads, func(r *scenarioRead) bool { return r.n == n }) // never answered
}

// iterate runs one iteration of n's loop: take is the select arm run
// takes for the work queued, then the iteration settles as run's does.
// A loop that runs on past its next tick has its timer fire at once.
func (h *scenarioHarness) iterate(n *scenarioNode, take func()) {
	h.on(n)
	take()
	if !n.l.settle() {
		h.t.Fatalf("n%d: the loop stopped: %v", n.id, n.node.Failure())
	}
	h.after(n)
}

// deliverTo queues msgs on n's inbound queue, as peer sessions do, and
// runs the iteration that takes them (the first in run's select, the rest
// in its drain).
func (h *scenarioHarness) deliverTo(n *scenarioNode, fs []*flight) {
	for len(fs) > 0 {
		k := min(len(fs), cap(n.node.recvc))
		var reports []*flight
		for _, f := range fs[:k] {
			if n.l.inVoteGrace(f.m.GetType()) { // the loop's own test, to say why nothing happens
				h.logf("n%d ignores %s: vote grace until %v on its clock", n.id, describe(f.m), fd(n.l.voteGrace.Sub(scenarioEpoch)))
			}
			in := inbound{msg: f.m}
			if f.snap != nil {
				in.staged = h.stage(n, f.snap)
				reports = append(reports, f)
			}
			n.node.recvc <- in
		}
		fs = fs[k:]
		h.iterate(n, func() { n.l.step(<-n.node.recvc) })
		for _, f := range reports {
			h.report(f.m.GetFrom(), report{to: f.m.GetTo(), kind: reportSnapshotDone, seq: f.snap.seq})
		}
	}
}

// stage receives a snapshot transfer's data into n's store, as the peer
// layer's session does before it hands over the MsgSnap.
func (h *scenarioHarness) stage(n *scenarioNode, s *snapFlight) *store.Staged {
	defer s.cp.Release()
	st := n.node.store.NewStaged(s.cp.Index(), s.cp.Term())
	err := s.cp.ForEach(st.Add)
	if err == nil {
		err = s.cp.ForEachLease(st.AddLease)
	}
	if err == nil {
		err = s.cp.ForEachRevision(st.AddRevision)
	}
	if err == nil {
		err = st.Finish()
	}
	if err != nil {
		h.t.Fatalf("n%d: staging a snapshot: %v", n.id, err)
	}
	return st
}

// report hands a peer sender's report to node id's loop.
func (h *scenarioHarness) report(id uint64, r report) {
	n := h.node(id)
	if n.node == nil || n.frozen {
		return // lost: a frozen loop's queue is not modelled for reports
	}
	n.node.reportc <- r
	h.iterate(n, func() { n.l.takeReport(<-n.node.reportc) })
}

// lostSnapshot reports a snapshot transfer that failed on the way.
func (h *scenarioHarness) lostSnapshot(f *flight) {
	f.snap.cp.Release()
	h.pendingReports = append(h.pendingReports, pendingReport{
		from: f.m.GetFrom(), r: report{to: f.m.GetTo(), kind: reportSnapshotFailed, seq: f.snap.seq}})
}

type pendingReport struct {
	from uint64
	r    report
}

func (h *scenarioHarness) send(m *pb.Message, snap *snapFlight) {
	f := &flight{m: m, snap: snap}
	link := [2]uint64{m.GetFrom(), m.GetTo()}
	if h.cut[link] || m.GetTo() > uint64(len(h.nodes)) {
		if snap != nil {
			h.lostSnapshot(f)
		}
		return
	}
	d, ok := h.delay[link]
	if !ok {
		d = h.latency
	}
	f.at = h.now + d
	h.net = append(h.net, f)
}

// deliverRound delivers the messages deliverable now, to one node at a
// time as a batch, the way the loop drains its queue before handling the
// Ready, and then the pending reports of failed transfers. It reports
// whether there were any.
func (h *scenarioHarness) deliverRound(only *scenarioNode, print bool) bool {
	var due, rest []*flight
	for _, f := range h.net {
		to := h.node(f.m.GetTo())
		if f.at <= h.now && !to.frozen && to.node != nil && (only == nil || to == only) {
			due = append(due, f)
		} else {
			rest = append(rest, f)
		}
	}
	h.net = rest
	for _, n := range h.nodes {
		var mine []*flight
		for _, f := range due {
			if f.m.GetTo() == n.id {
				if print {
					h.logf("%s", describe(f.m))
				}
				mine = append(mine, f)
			}
		}
		if len(mine) > 0 {
			h.deliverTo(n, mine)
		}
	}
	reports := h.pendingReports
	h.pendingReports = nil
	for _, p := range reports {
		h.report(p.from, p.r)
	}
	return len(due) > 0 || len(reports) > 0
}

func (h *scenarioHarness) stabilize() {
	for i := 0; h.deliverRound(nil, false); i++ {
		if i > 10000 {
			h.t.Fatal("the network does not settle")
		}
	}
}

// thaw resumes n: its queue was filling while it was stopped, and the
// loop drains it as it comes back from the freeze; then its overdue timer
// fires.
func (h *scenarioHarness) thaw(n *scenarioNode) {
	n.frozen = false
	if !h.deliverRound(n, false) {
		h.iterate(n, func() {}) // the freeze arm of run's select
	}
	if n.tickDue() {
		h.iterate(n, n.l.tick)
	}
}

// advanceTo moves real time to target, taking the ticks and delivering the
// messages that fall due on the way, in time order.
func (h *scenarioHarness) advanceTo(target time.Duration) {
	for i := 0; ; i++ {
		if i > 1_000_000 {
			h.t.Fatal("advance does not progress")
		}
		h.stabilize()
		next := target + 1
		for _, n := range h.live() {
			if !n.frozen {
				next = min(next, n.nextTickReal())
			}
		}
		for _, f := range h.net {
			if !h.node(f.m.GetTo()).frozen {
				next = min(next, f.at)
			}
		}
		if next > target {
			break
		}
		h.now = max(h.now, next)
		h.stabilize() // a message may be stepped before the timer fires
		for _, n := range h.live() {
			if n.tickDue() {
				h.iterate(n, n.l.tick)
			}
		}
	}
	h.now = max(h.now, target)
	h.stabilize()
}

// live are the nodes started.
func (h *scenarioHarness) live() []*scenarioNode {
	var out []*scenarioNode
	for _, n := range h.nodes {
		if n.node != nil {
			out = append(out, n)
		}
	}
	return out
}

// newScenarioNode makes node id with a fresh in-memory disk and a clock in
// step with real time; open starts it.
func (h *scenarioHarness) newScenarioNode(id uint64) *scenarioNode {
	return &scenarioNode{h: h, id: id, fs: vfs.NewMem(), clock: fakeClock{segs: []clockSeg{{real: h.now, local: h.now, rate: 1}}},
		leases: make(map[uint64]time.Duration), announced: make(map[uint64]bool)}
}
