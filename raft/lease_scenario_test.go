package raft

import (
	cryptorand "crypto/rand"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestLeaseScenarios runs the read lease scenarios of testdata/lease: etcd
// RawNodes on MemoryStorage driven by kvd's lease machinery (loop.tick and
// startClock, the lease half of ready.go's Ready handling, readTracker and
// leaseGrants, lease) on fake clocks, over a network the scenario controls.
// After every command, and after every Ready, the harness checks the lease
// invariants and prints a VIOLATION line when one breaks (see check).
//
// The harness calls the loop's own tick, startClock, inVoteGrace,
// softState, hardState and readTracker; it copies, as it must, the rest of
// handleReady (storage, apply, send) and step's order of work (due ticks,
// then the vote grace, then raft): step itself needs the Pebble store for
// its message filter. A change to either is not seen here.
//
// Rewrite the expected output after a deliberate change with
//
//	go test ./raft/ -run TestLeaseScenarios -rewrite
//
// Commands (ids are raft ids, durations Go durations):
//
//	nodes N [stagger=D] [latency=D] [lease-drift=F] [max-apply-bytes=B]
//	    N voters, Config defaults (ElectionTicks, HeartbeatTicks,
//	    TickInterval, LeaseDrift as the node has them), node i's ticks
//	    (i-1)*stagger after node 1's
//	campaign ID                  ID's election timer fires (MsgHup)
//	propose ID k=v               a client write at ID
//	advance D                    real time moves on by D: every clock by its
//	                             rate, due ticks taken, messages delivered
//	tick ID [N]                  advance until ID has taken N more ticks
//	deliver [ID]                 deliver the messages in flight (to ID only),
//	                             once, and print them
//	stabilize                    deliver until no message is in flight
//	drop type=T                  drop the in-flight messages of type T
//	step ID type=T from=F [term=N]
//	                             step a message straight into ID's RawNode
//	                             (bypassing the loop) and print what it sends
//	isolate ID | cut A B | heal  cut links (messages sent over a cut link
//	                             are lost), or restore them all
//	latency D [A B]              one-way delay of the messages sent from now
//	                             on (over the link from A to B only)
//	freeze ID | thaw ID          ID stops taking ticks and messages while its
//	                             clock runs on (SIGSTOP), or resumes
//	restart ID                   ID restarts from its durable state
//	clock-rate ID R              ID's clock runs R times as fast as real time
//	hold-apply ID | release-apply ID
//	                             ID's committed entries wait to be applied
//	                             (an applier running behind), or catch up
//	jitter ID N                  ID's randomized election timeout is
//	                             ElectionTicks+N from its next reset on
//	lease | status               print each node's lease, or raft state
//
// Unless a scenario sets a jitter, every randomized election timeout is
// exactly ElectionTicks: the earliest election raft allows, which is what
// the lease must survive.
func TestLeaseScenarios(t *testing.T) {
	// raft draws randomized election timeouts from crypto/rand (and nothing
	// else in these tests does): the harness answers with the jitter of the
	// node it is driving.
	prev := cryptorand.Reader
	cryptorand.Reader = jitterReader{}
	t.Cleanup(func() { cryptorand.Reader = prev })
	datadriven.Walk(t, "testdata/lease", func(t *testing.T, path string) {
		h := &leaseHarness{t: t}
		datadriven.RunTest(t, path, h.handle)
	})
}

// scenarioJitter is what raft draws next for a randomized election
// timeout (crypto/rand.Int reads its bytes big-endian): the jitter of the
// node the harness is driving.
var scenarioJitter byte

type jitterReader struct{}

func (jitterReader) Read(b []byte) (int, error) {
	clear(b)
	b[len(b)-1] = scenarioJitter
	return len(b), nil
}

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

type scenarioNode struct {
	h         *leaseHarness
	id        uint64
	clock     fakeClock
	ms        *etcdraft.MemoryStorage
	l         *loop
	frozen    bool
	holdApply bool
	jitter    byte
	held      []*pb.Entry // committed, not applied yet

	state etcdraft.StateType // as last printed
	term  uint64

	// What clients may have read from this node's region: the latest
	// expiry published in each term (a revocation does not unpublish it),
	// and the expiry published last (zero once revoked).
	leases    map[uint64]time.Duration
	cur       time.Duration
	curTerm   uint64
	announced map[uint64]bool // "holds a lease" printed for the term
	announce  uint64          // a term whose first lease is to be printed
}

// on makes n the node raft's randomness is drawn for.
func (h *leaseHarness) on(n *scenarioNode) *scenarioNode {
	scenarioJitter = n.jitter
	return n
}

func (n *scenarioNode) local() time.Duration { return n.clock.at(n.h.now) }
func (n *scenarioNode) now() time.Time       { return scenarioEpoch.Add(n.local()) }

type flight struct {
	m  *pb.Message
	at time.Duration // deliverable from then
}

// termEvent is the first moment a term had a leader, or a committed entry.
type termEvent struct {
	what       string
	node, term uint64
	at         time.Duration
}

type ackedEntry struct {
	index, term, node uint64
	at                time.Duration
}

type leaseHarness struct {
	t       *testing.T
	cfg     Config
	now     time.Duration // real time
	nodes   []*scenarioNode
	net     []*flight
	latency time.Duration
	delay   map[[2]uint64]time.Duration // per link, overrides latency
	cut     map[[2]uint64]bool

	events        []termEvent
	leaders       map[uint64]uint64 // term -> its leader
	committedTerm uint64
	proposer      map[string]uint64 // command -> node it was proposed at
	acked         []ackedEntry      // writes acknowledged to their client

	out  *strings.Builder
	seen map[string]bool // violations reported

	reads []*scenarioRead // ReadIndex calls not finished yet
	nread int
}

// scenarioRead is a ReadIndex call (an RPC GET's barrier) at a node.
type scenarioRead struct {
	id    int
	n     *scenarioNode
	r     *readRequest
	start time.Duration
}

// pollReads reports the ReadIndex calls that finished, checking that the
// node's applied state holds every write acknowledged before the call.
func (h *leaseHarness) pollReads() {
	keep := h.reads[:0]
	for _, rd := range h.reads {
		select {
		case err := <-rd.r.done:
			if err != nil {
				h.logf("read %d at n%d fails: %v", rd.id, rd.n.id, err)
				continue
			}
			h.logf("read %d at n%d returns, applied %d", rd.id, rd.n.id, rd.n.l.applied)
			for _, w := range h.acked {
				if w.at <= rd.start && w.index > rd.n.l.applied {
					h.violation(fmt.Sprintf("staleread/%d/%d", rd.id, w.index),
						"read %d at n%d (started %v) returned with applied %d, missing index %d acknowledged at %v by n%d",
						rd.id, rd.n.id, fd(rd.start), rd.n.l.applied, w.index, fd(w.at), w.node)
				}
			}
		default:
			keep = append(keep, rd)
		}
	}
	h.reads = keep
}

func (h *leaseHarness) printf(format string, args ...any) {
	fmt.Fprintf(h.out, format+"\n", args...)
}

// logf prints an event line stamped with the real time.
func (h *leaseHarness) logf(format string, args ...any) {
	h.printf("[%v] "+format, append([]any{fd(h.now)}, args...)...)
}

func (h *leaseHarness) violation(key, format string, args ...any) {
	if h.seen[key] {
		return
	}
	h.seen[key] = true
	h.printf("VIOLATION: "+format, args...)
}

// fd formats a duration to the microsecond.
func fd(d time.Duration) string { return d.Round(time.Microsecond).String() }

func (h *leaseHarness) handle(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	h.out = &b
	pos := posArgs(d)
	nodeArg := func(i int) *scenarioNode {
		if i >= len(pos) {
			d.Fatalf(t, "%s: missing node id", d.Cmd)
		}
		id, err := strconv.ParseUint(pos[i], 10, 64)
		if err != nil || id == 0 || id > uint64(len(h.nodes)) {
			d.Fatalf(t, "%s: bad node id %q", d.Cmd, pos[i])
		}
		return h.nodes[id-1]
	}
	durArg := func(s string) time.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			d.Fatalf(t, "%s: %v", d.Cmd, err)
		}
		return v
	}
	if d.Cmd != "nodes" && h.nodes == nil {
		d.Fatalf(t, "%s before nodes", d.Cmd)
	}
	switch d.Cmd {
	case "nodes":
		n, err := strconv.Atoi(pos[0])
		if err != nil || n < 1 {
			d.Fatalf(t, "nodes: bad count %q", pos[0])
		}
		cfg := Config{Logger: slog.New(slog.DiscardHandler)}
		var stagger time.Duration
		h.latency = 0
		for _, a := range d.CmdArgs[1:] {
			switch a.Key {
			case "stagger":
				stagger = durArg(a.Vals[0])
			case "latency":
				h.latency = durArg(a.Vals[0])
			case "lease-drift":
				a.Scan(t, 0, &cfg.LeaseDrift)
			case "max-apply-bytes":
				a.Scan(t, 0, &cfg.MaxApplyBytes)
			default:
				d.Fatalf(t, "nodes: unknown argument %s", a.Key)
			}
		}
		h.setup(cfg.withDefaults(), n, stagger)
		h.printf("election timeout %v, lease %v (ElectionTicks %d, TickInterval %v, LeaseDrift %v)",
			h.cfg.electionTimeout(), h.cfg.leaseDuration(), h.cfg.ElectionTicks, h.cfg.TickInterval, h.cfg.LeaseDrift)
	case "campaign":
		n := h.on(nodeArg(0))
		n.l.tick()
		if err := n.l.rn.Campaign(); err != nil {
			h.logf("n%d: campaign: %v", n.id, err)
		}
		h.ready(n)
	case "propose":
		n := h.on(nodeArg(0))
		if len(d.CmdArgs) < 2 || len(d.CmdArgs[1].Vals) != 1 {
			d.Fatalf(t, "propose ID k=v")
		}
		cmd := d.CmdArgs[1].Key + "=" + d.CmdArgs[1].Vals[0]
		n.l.tick() // the loop takes due ticks before a proposal
		if !n.l.isLeader {
			h.logf("n%d refuses %s: not the leader", n.id, cmd)
			break
		}
		if err := n.l.rn.Propose([]byte(cmd)); err != nil {
			h.logf("n%d: propose %s: %v", n.id, cmd, err)
		}
		h.proposer[cmd] = n.id
		h.ready(n)
	case "advance":
		h.advanceTo(h.now + durArg(pos[0]))
	case "tick":
		n := nodeArg(0)
		count := 1
		if len(pos) > 1 {
			count, _ = strconv.Atoi(pos[1])
		}
		if n.frozen {
			d.Fatalf(t, "tick: n%d is frozen", n.id)
		}
		for range count {
			h.advanceTo(max(h.now, n.clock.realAt(n.l.nextTick.Sub(scenarioEpoch))))
		}
	case "deliver":
		var only *scenarioNode
		if len(pos) > 0 {
			only = nodeArg(0)
		}
		h.deliverRound(only, true)
	case "deliver-one":
		// the oldest deliverable message to ID, stepped and handled alone
		// (the loop took it before the next one arrived)
		n := nodeArg(0)
		for i, f := range h.net {
			if f.m.GetTo() == n.id && f.at <= h.now && !n.frozen {
				h.net = append(h.net[:i:i], h.net[i+1:]...)
				h.logf("%s", describe(f.m))
				h.step(n, f.m)
				h.ready(n)
				break
			}
		}
	case "stabilize":
		h.stabilize()
	case "drop":
		var typ string
		d.ScanArgs(t, "type", &typ)
		keep := h.net[:0]
		for _, f := range h.net {
			if f.m.GetType().String() == typ {
				h.logf("dropped %s", describe(f.m))
			} else {
				keep = append(keep, f)
			}
		}
		h.net = keep
	case "step":
		n := h.on(nodeArg(0))
		var typ string
		var from uint64
		d.ScanArgs(t, "type", &typ)
		d.ScanArgs(t, "from", &from)
		v, ok := pb.MessageType_value[typ]
		if !ok {
			d.Fatalf(t, "step: unknown message type %q", typ)
		}
		term := n.l.rn.BasicStatus().GetTerm()
		if pb.MessageType(v) == pb.MsgTransferLeader {
			term = 0 // raft sends it without one (and panics forwarding one with a term)
		}
		d.MaybeScanArgs(t, "term", &term)
		m := &pb.Message{Type: pb.MessageType(v).Enum(), From: new(from), To: new(n.id), Term: new(term)}
		sent := len(h.net)
		n.l.tick()
		if err := n.l.rn.Step(m); err != nil {
			h.logf("n%d: step %s: %v", n.id, describe(m), err)
		}
		h.ready(n)
		for _, f := range h.net[sent:] {
			h.logf("n%d sends %s", n.id, describe(f.m))
		}
	case "isolate":
		n := nodeArg(0)
		for _, o := range h.nodes {
			if o != n {
				h.cut[[2]uint64{n.id, o.id}], h.cut[[2]uint64{o.id, n.id}] = true, true
			}
		}
	case "cut":
		a, b := nodeArg(0), nodeArg(1)
		h.cut[[2]uint64{a.id, b.id}], h.cut[[2]uint64{b.id, a.id}] = true, true
	case "heal":
		clear(h.cut)
	case "latency":
		if len(pos) == 3 {
			a, b := nodeArg(1), nodeArg(2)
			h.delay[[2]uint64{a.id, b.id}] = durArg(pos[0])
		} else {
			h.latency = durArg(pos[0])
		}
	case "freeze":
		nodeArg(0).frozen = true
	case "thaw":
		h.thaw(nodeArg(0))
	case "restart":
		n := nodeArg(0)
		keep := h.net[:0]
		for _, f := range h.net {
			if f.m.GetTo() != n.id { // lost with the connections
				keep = append(keep, f)
			}
		}
		h.net = keep
		n.frozen, n.held = false, nil
		h.start(n, true, n.l.applied)
		if n.l.voteGrace.IsZero() {
			h.logf("n%d restarts in term %d, with no vote grace", n.id, n.l.term)
		} else {
			h.logf("n%d restarts in term %d, ignoring votes until %v on its clock", n.id, n.l.term, fd(n.l.voteGrace.Sub(scenarioEpoch)))
		}
		h.observe(n)
	case "clock-rate":
		n := nodeArg(0)
		var rate float64
		if _, err := fmt.Sscan(pos[1], &rate); err != nil || rate <= 0 {
			d.Fatalf(t, "clock-rate: bad rate %q", pos[1])
		}
		n.clock.setRate(h.now, rate)
	case "jitter":
		n := nodeArg(0)
		j, err := strconv.Atoi(pos[1])
		if err != nil || j < 0 || j >= h.cfg.ElectionTicks {
			d.Fatalf(t, "jitter: want 0 <= N < ElectionTicks, got %q", pos[1])
		}
		n.jitter = byte(j)
	case "hold-apply":
		nodeArg(0).holdApply = true
	case "release-apply":
		n := nodeArg(0)
		n.holdApply = false
		h.apply(n)
		n.l.reads.applied(n.l) // what the loop does after an apply
		h.announceLease(n)
		h.checkApplied()
	case "read":
		n := h.on(nodeArg(0))
		n.l.tick()
		h.nread++
		rd := &scenarioRead{id: h.nread, n: n, r: &readRequest{done: make(chan error, 1)}, start: h.now}
		h.reads = append(h.reads, rd)
		n.l.reads.add(n.l, rd.r)
		n.l.reads.flush(n.l)
		h.logf("read %d starts at n%d (applied %d)", rd.id, n.id, n.l.applied)
		h.ready(n)
		h.pollReads()
	case "lease":
		h.printLeases()
	case "status":
		h.printStatus()
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	h.check()
	if b.Len() == 0 {
		return "ok"
	}
	return b.String()
}

// posArgs are the arguments without a value, in order.
func posArgs(d *datadriven.TestData) []string {
	var out []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			out = append(out, a.Key)
		}
	}
	return out
}

func (h *leaseHarness) setup(cfg Config, n int, stagger time.Duration) {
	*h = leaseHarness{t: h.t, out: h.out, latency: h.latency}
	h.cfg = cfg
	h.cut = make(map[[2]uint64]bool)
	h.delay = make(map[[2]uint64]time.Duration)
	h.leaders = make(map[uint64]uint64)
	h.proposer = make(map[string]uint64)
	h.seen = make(map[string]bool)
	voters := make([]uint64, n)
	for i := range voters {
		voters[i] = uint64(i + 1)
	}
	for _, id := range voters {
		ms := etcdraft.NewMemoryStorage()
		snap := pb.EnsureSnapshot(nil)
		snap.Metadata.Index, snap.Metadata.Term = new(uint64(2)), new(uint64(1))
		snap.Metadata.ConfState.Voters = voters
		if err := ms.ApplySnapshot(snap); err != nil {
			h.t.Fatal(err)
		}
		if err := ms.SetHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(2))}); err != nil {
			h.t.Fatal(err)
		}
		sn := &scenarioNode{h: h, id: id, ms: ms, clock: fakeClock{segs: []clockSeg{{rate: 1}}},
			leases: make(map[uint64]time.Duration), announced: make(map[uint64]bool)}
		h.nodes = append(h.nodes, sn)
		h.start(sn, false, 2)
		sn.l.nextTick = sn.l.nextTick.Add(time.Duration(id-1) * stagger)
	}
}

// start builds n's loop as newLoop does, on n's storage and clock.
func (h *leaseHarness) start(n *scenarioNode, restarted bool, applied uint64) {
	h.on(n)
	c := h.cfg
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{
		ID:                        n.id,
		ElectionTick:              c.ElectionTicks,
		HeartbeatTick:             c.HeartbeatTicks,
		Storage:                   n.ms,
		Applied:                   applied,
		MaxSizePerMsg:             c.MaxSizePerMsg,
		MaxCommittedSizePerReady:  c.MaxApplyBytes,
		MaxUncommittedEntriesSize: c.MaxUncommittedBytes,
		MaxInflightMsgs:           c.MaxInflightMsgs,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            etcdraft.ReadOnlySafe,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{c.Logger},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	hs, _, _ := n.ms.InitialState()
	m, _ := newMetrics(nil)
	node := &Node{cfg: c, id: n.id, log: c.Logger, metrics: m}
	node.lease = newLease(func(term uint64, exp time.Time) { h.published(n, term, exp) }, hs.GetTerm())
	node.lease.now = n.now
	n.l = &loop{
		n: node, rn: rn, sm: nopSM{}, cfg: c,
		now:     n.now,
		term:    hs.GetTerm(),
		commit:  hs.GetCommit(),
		applied: applied,
		waiters: make(map[uint64]*proposal),
		reads:   newReadTracker(),

		snapPending: make(map[uint64]uint64),
	}
	n.l.startClock(restarted)
	st := rn.BasicStatus()
	n.state, n.term = st.RaftState, st.GetTerm()
}

// ready handles n's Readies as loop.handleReady does, with MemoryStorage
// for Pebble and the harness's network for the peer senders.
func (h *leaseHarness) ready(n *scenarioNode) {
	h.on(n)
	l := n.l
	for l.rn.HasReady() {
		rd := l.rn.Ready()
		l.readyFlag = readyFlags{}
		if rd.SoftState != nil {
			l.softState(rd.SoftState)
		}
		if rd.HardState != nil {
			l.hardState(rd.HardState)
		}
		if !etcdraft.IsEmptySnap(rd.Snapshot) {
			h.t.Fatalf("n%d: snapshots are not modelled", n.id)
		}
		if err := n.ms.Append(rd.Entries); err != nil {
			h.t.Fatal(err)
		}
		if rd.HardState != nil {
			if err := n.ms.SetHardState(rd.HardState); err != nil {
				h.t.Fatal(err)
			}
		}
		for _, e := range rd.CommittedEntries {
			if e.GetType() != pb.EntryNormal {
				h.t.Fatalf("n%d: conf changes are not modelled", n.id)
			}
			if e.GetTerm() > h.committedTerm {
				h.committedTerm = e.GetTerm()
				h.events = append(h.events, termEvent{what: "commit", node: n.id, term: e.GetTerm(), at: h.now})
				h.logf("n%d commits the first entry of term %d (index %d)", n.id, e.GetTerm(), e.GetIndex())
			}
		}
		n.held = append(n.held, rd.CommittedEntries...)
		if !n.holdApply {
			h.apply(n)
		}
		for _, m := range rd.Messages {
			h.send(m)
		}
		l.reads.applied(l) // afterCommit
		l.reads.readStates(l, rd.ReadStates)
		h.pollReads()
		l.rn.Advance(rd)
		h.announceLease(n)
		h.checkApplied()
	}
	h.observe(n)
}

// announceLease prints a node's first lease of a term, once the Ready that
// granted it is handled.
func (h *leaseHarness) announceLease(n *scenarioNode) {
	if t := n.announce; t != 0 {
		n.announce = 0
		e := n.leases[t]
		h.logf("n%d holds a lease of term %d until %v on its clock (%v real)", n.id, t, fd(e), fd(n.clock.realAt(e)))
	}
}

// apply applies n's committed entries; a write is acknowledged when the
// node it was proposed at applies it.
func (h *leaseHarness) apply(n *scenarioNode) {
	for _, e := range n.held {
		n.l.applied = e.GetIndex()
		if p, ok := h.proposer[string(e.GetData())]; ok && p == n.id {
			h.acked = append(h.acked, ackedEntry{index: e.GetIndex(), term: e.GetTerm(), node: n.id, at: h.now})
		}
	}
	n.held = nil
}

func (h *leaseHarness) send(m *pb.Message) {
	link := [2]uint64{m.GetFrom(), m.GetTo()}
	if h.cut[link] {
		return
	}
	d, ok := h.delay[link]
	if !ok {
		d = h.latency
	}
	h.net = append(h.net, &flight{m: m, at: h.now + d})
}

// step hands n a peer message as loop.step does: due ticks first, then the
// vote grace, then raft. (step itself needs the Pebble store now, for its
// message filter, and reads time.Now for the vote grace.)
func (h *leaseHarness) step(n *scenarioNode, m *pb.Message) {
	h.on(n)
	n.l.tick()
	if n.l.inVoteGrace(m.GetType()) {
		h.logf("n%d ignores %s: vote grace until %v on its clock", n.id, describe(m), fd(n.l.voteGrace.Sub(scenarioEpoch)))
		return
	}
	_ = n.l.rn.Step(m)
}

// deliverRound delivers the messages deliverable now, to one node at a
// time as a batch, the way the loop drains its queue before handling the
// Ready. It reports whether there were any.
func (h *leaseHarness) deliverRound(only *scenarioNode, print bool) bool {
	var due, rest []*flight
	for _, f := range h.net {
		to := h.nodes[f.m.GetTo()-1]
		if f.at <= h.now && !to.frozen && (only == nil || to == only) {
			due = append(due, f)
		} else {
			rest = append(rest, f)
		}
	}
	h.net = rest
	for _, n := range h.nodes {
		stepped := false
		for _, f := range due {
			if f.m.GetTo() != n.id {
				continue
			}
			if print {
				h.logf("%s", describe(f.m))
			}
			h.step(n, f.m)
			stepped = true
		}
		if stepped {
			h.ready(n)
		}
	}
	return len(due) > 0
}

func (h *leaseHarness) stabilize() {
	for i := 0; h.deliverRound(nil, false); i++ {
		if i > 10000 {
			h.t.Fatal("the network does not settle")
		}
	}
}

// thaw resumes n: its queue was filling while it was stopped, and it may
// take those messages before its timer (stepping one takes the due ticks
// first anyway).
func (h *leaseHarness) thaw(n *scenarioNode) {
	n.frozen = false
	h.deliverRound(n, false)
	h.on(n).l.tick()
	h.ready(n)
}

// advanceTo moves real time to target, taking the ticks and delivering the
// messages that fall due on the way, in time order.
func (h *leaseHarness) advanceTo(target time.Duration) {
	for i := 0; ; i++ {
		if i > 1_000_000 {
			h.t.Fatal("advance does not progress")
		}
		h.stabilize()
		next := target + 1
		for _, n := range h.nodes {
			if !n.frozen {
				next = min(next, n.clock.realAt(n.l.nextTick.Sub(scenarioEpoch)))
			}
		}
		for _, f := range h.net {
			if !h.nodes[f.m.GetTo()-1].frozen {
				next = min(next, f.at)
			}
		}
		if next > target {
			break
		}
		h.now = max(h.now, next)
		h.stabilize() // a message may be stepped before the timer fires
		for _, n := range h.nodes {
			if !n.frozen && !n.now().Before(n.l.nextTick) {
				h.on(n).l.tick()
				h.ready(n)
			}
		}
	}
	h.now = max(h.now, target)
	h.stabilize()
}

// observe prints a change of n's role or term; a new leader is checked
// against the leases of older terms.
func (h *leaseHarness) observe(n *scenarioNode) {
	st := n.l.rn.BasicStatus()
	if st.RaftState == n.state && st.GetTerm() == n.term {
		return
	}
	n.state, n.term = st.RaftState, st.GetTerm()
	line := fmt.Sprintf("n%d is %s in term %d", n.id, roleName(st.RaftState), st.GetTerm())
	if st.RaftState == etcdraft.StateLeader {
		h.leaders[st.GetTerm()] = n.id
		h.events = append(h.events, termEvent{what: "leader", node: n.id, term: st.GetTerm(), at: h.now})
		// The latest end, in real time, of another node's lease of an
		// older term.
		var last time.Duration
		var who *scenarioNode
		var term uint64
		for _, a := range h.nodes {
			for _, t := range sortedKeys(a.leases) {
				if a != n && t < st.GetTerm() {
					if r := a.clock.realAt(a.leases[t]); who == nil || r > last {
						last, who, term = r, a, t
					}
				}
			}
		}
		if who != nil {
			if last <= h.now {
				line += fmt.Sprintf(" (n%d's lease of term %d ran out %v earlier)", who.id, term, fd(h.now-last))
			} else {
				line += fmt.Sprintf(" (n%d's lease of term %d runs %v longer)", who.id, term, fd(last-h.now))
			}
		}
	}
	h.logf("%s", line)
}

func roleName(s etcdraft.StateType) string {
	switch s {
	case etcdraft.StateLeader:
		return "leader"
	case etcdraft.StateCandidate:
		return "candidate"
	case etcdraft.StatePreCandidate:
		return "pre-candidate"
	default:
		return "follower"
	}
}

// published records what n's lease published through OnLease.
func (h *leaseHarness) published(n *scenarioNode, term uint64, exp time.Time) {
	if exp.IsZero() {
		if n.cur != 0 && n.local() < n.cur {
			h.logf("n%d ends its lease of term %d early", n.id, n.curTerm)
		}
		n.cur, n.curTerm = 0, term
		return
	}
	e := exp.Sub(scenarioEpoch)
	if !n.l.isLeader {
		h.violation(fmt.Sprintf("follower-lease/%d/%d", n.id, term),
			"n%d published a lease of term %d while not the leader", n.id, term)
	}
	if prev, seen := n.leases[term]; !seen || e > prev {
		n.leases[term] = e
	}
	switch {
	case slices.ContainsFunc(h.events, func(ev termEvent) bool { return ev.term > term }):
		h.logf("n%d publishes a lease of term %d until %v on its clock (%v real) after a later term began", n.id, term, fd(e), fd(n.clock.realAt(e)))
	case !n.announced[term] && n.local() < e:
		n.announced[term], n.announce = true, term // printed after the Ready
	}
	n.cur, n.curTerm = e, term
}

// check verifies the lease invariant: at no real instant does a node hold
// a published lease that has not expired (by its own clock) at or after
// the moment another node became leader of a higher term or an entry of a
// higher term was committed. A published lease counts until it expires,
// revoked or not: a client may have read it. (The harness checks the
// stronger "at or after the moment", rather than "while", so that a lease
// published in an old term after a newer one began counts too.)
func (h *leaseHarness) check() {
	for _, ev := range h.events {
		lead := h.leaders[ev.term]
		for _, a := range h.nodes {
			if a.id == lead {
				continue // its own region
			}
			for _, term := range sortedKeys(a.leases) {
				exp := a.leases[term]
				if term >= ev.term || a.clock.at(ev.at) >= exp {
					continue
				}
				what := "became leader"
				if ev.what == "commit" {
					what = "committed an entry"
				}
				h.violation(fmt.Sprintf("overlap/%d/%d/%s/%d", a.id, term, ev.what, ev.term),
					"n%d's lease of term %d runs until %v real (%v on its clock), but n%d %s of term %d at %v: %v of overlap",
					a.id, term, fd(a.clock.realAt(exp)), fd(exp), ev.node, what, ev.term, fd(ev.at), fd(a.clock.realAt(exp)-ev.at))
			}
		}
	}
	h.checkApplied()
}

// checkApplied verifies that a node holding an unexpired lease shows every
// write of its term or before that was acknowledged by now: its region is
// what the clients read.
func (h *leaseHarness) checkApplied() {
	for _, a := range h.nodes {
		for _, term := range sortedKeys(a.leases) {
			if a.local() >= a.leases[term] {
				continue
			}
			for _, w := range h.acked {
				if w.term <= term && w.index > a.l.applied {
					h.violation(fmt.Sprintf("stale/%d/%d/%d", a.id, term, w.index),
						"n%d holds a lease of term %d until %v real but has applied only up to %d; index %d was acknowledged at %v by n%d",
						a.id, term, fd(a.clock.realAt(a.leases[term])), a.l.applied, w.index, fd(w.at), w.node)
				}
			}
		}
	}
}

func sortedKeys(m map[uint64]time.Duration) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func describe(m *pb.Message) string {
	s := fmt.Sprintf("%d->%d %s term=%d", m.GetFrom(), m.GetTo(), m.GetType(), m.GetTerm())
	if len(m.GetContext()) > 0 && m.GetType() != pb.MsgHeartbeat && m.GetType() != pb.MsgHeartbeatResp {
		s += fmt.Sprintf(" context=%q", m.GetContext())
	}
	if m.GetReject() {
		s += " reject"
	}
	return s
}

func (h *leaseHarness) printLeases() {
	h.printf("real time %v", fd(h.now))
	for _, n := range h.nodes {
		line := fmt.Sprintf("n%d %s term %d, clock %v: ", n.id, roleName(n.state), n.term, fd(n.local()))
		switch {
		case n.cur == 0:
			line += "no lease"
		case n.local() < n.cur:
			line += fmt.Sprintf("lease of term %d until %v (%v real), %v left", n.curTerm, fd(n.cur), fd(n.clock.realAt(n.cur)), fd(n.cur-n.local()))
		default:
			line += fmt.Sprintf("lease of term %d expired at %v (%v real)", n.curTerm, fd(n.cur), fd(n.clock.realAt(n.cur)))
		}
		if n.frozen {
			line += " [frozen]"
		}
		h.printf("%s", line)
	}
}

func (h *leaseHarness) printStatus() {
	for _, n := range h.nodes {
		st := n.l.rn.BasicStatus()
		h.printf("n%d %s term %d lead %d commit %d applied %d", n.id, roleName(st.RaftState), st.GetTerm(), st.Lead, st.HardState.GetCommit(), n.l.applied)
	}
}
