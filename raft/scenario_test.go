package raft

import (
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/store"
)

// TestLeaseScenarios and the tests below run the scenarios of
// testdata/lease (the read lease), testdata/snapshot (catching up through
// a snapshot), testdata/membership and testdata/admission on the scenario
// harness (harness_test.go): real nodes, each running the real raft loop
// (tick, step, propose, the Ready handling of ready.go with its
// pipelining, the lease, reads) on an in-memory Pebble, a fake clock and
// a network the scenario controls, with testKV as the state machine. After every command, and after every
// loop iteration, the harness checks the lease invariants and prints a
// VIOLATION line when one breaks (see check).
//
// Rewrite the expected output after a deliberate change with
//
//	go test ./raft/ -run 'Test.*Scenarios' -rewrite
//
// Commands (ids are raft ids, durations Go durations):
//
//	nodes N [stagger=D] [latency=D] [lease-drift=F] [max-apply-bytes=B]
//	      [snapshot-count=C] [catch-up=E]
//	    N voters bootstrapped as Open does, Config defaults
//	    (ElectionTicks, HeartbeatTicks, TickInterval, LeaseDrift as the
//	    node has them), node i's ticks (i-1)*stagger after node 1's
//	campaign ID                  ID's election timer fires (MsgHup)
//	propose ID k=v [admit-term=T]
//	                             a client write at ID (admitted in term T)
//	advance D                    real time moves on by D: every clock by its
//	                             rate, due ticks taken, messages delivered
//	tick ID [N]                  advance until ID has taken N more ticks
//	deliver [ID]                 deliver the messages in flight (to ID only),
//	                             once, and print them
//	deliver-one ID               the oldest deliverable message to ID alone
//	stabilize                    deliver until no message is in flight
//	net                          print the messages in flight
//	drop type=T                  drop the in-flight messages of type T
//	transfer ID to=T             a TransferLeadership call at ID, moving
//	                             leadership to T
//	step ID type=T from=F [term=N]
//	                             step a message straight into ID's RawNode
//	                             (bypassing the loop's filter) in a loop
//	                             iteration, and print what it sends
//	isolate ID | cut A B | heal  cut links (messages sent over a cut link
//	                             are lost), or restore them all
//	latency D [A B]              one-way delay of the messages sent from now
//	                             on (over the link from A to B only)
//	freeze ID | thaw ID          ID's loop stops taking ticks and messages
//	                             while its clock runs on (SIGSTOP), or resumes
//	restart ID                   ID crashes and restarts from its disk
//	clock-rate ID R              ID's clock runs R times as fast as real time
//	jitter ID N                  ID's randomized election timeout is
//	                             ElectionTicks+N from its next reset on
//	read ID                      a ReadIndex call at ID
//	join ID                      start node ID (the next id) to join
//	add-learner|promote|remove LEADER ID
//	                             a membership change proposed at LEADER
//	get ID key                   ID's applied value of key
//	lease | status | members ID  print each node's lease, or raft state, or
//	                             ID's view of the group (Node.Status and
//	                             Node.Members)
//
// Unless a scenario sets a jitter, every randomized election timeout is
// exactly ElectionTicks: the earliest election raft allows, which is what
// the lease must survive.
func TestLeaseScenarios(t *testing.T)      { runScenarios(t, "testdata/lease") }
func TestSnapshotScenarios(t *testing.T)   { runScenarios(t, "testdata/snapshot") }
func TestMembershipScenarios(t *testing.T) { runScenarios(t, "testdata/membership") }
func TestAdmissionScenarios(t *testing.T)  { runScenarios(t, "testdata/admission") }

func runScenarios(t *testing.T, dir string) {
	// raft draws randomized election timeouts from crypto/rand (and nothing
	// else in these tests does): the harness answers with the jitter of the
	// node it is driving.
	prev := cryptorand.Reader
	cryptorand.Reader = jitterReader{}
	t.Cleanup(func() { cryptorand.Reader = prev })
	datadriven.Walk(t, dir, func(t *testing.T, path string) {
		h := &scenarioHarness{t: t}
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

type scenarioNode struct {
	h      *scenarioHarness
	id     uint64
	clock  fakeClock
	fs     vfs.FS // its disk, kept across restarts
	node   *Node  // nil until started
	l      *loop
	frozen bool
	jitter byte
	props  []*scenarioProp // proposals not finished yet

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

// scenarioProp is a proposal (a write or a membership change) at a node.
type scenarioProp struct {
	what string
	p    *proposal
	// report: print its success too (membership changes, admitted writes)
	report bool
}

// scenarioSM is testKV, watched: the harness learns from it when entries
// commit, when the writes proposed at this node are acknowledged, and when
// a snapshot is installed.
type scenarioSM struct {
	testKV
	n *scenarioNode
}

func (m *scenarioSM) Apply(u *store.Update, ents []*pb.Entry, out []Outcome) ([]Outcome, error) {
	h := m.n.h
	for _, e := range ents {
		if e.GetTerm() > h.committedTerm {
			h.committedTerm = e.GetTerm()
			h.events = append(h.events, termEvent{what: "commit", node: m.n.id, term: e.GetTerm(), at: h.now})
			h.logf("n%d commits the first entry of term %d (index %d)", m.n.id, e.GetTerm(), e.GetIndex())
		}
		if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		// A write is acknowledged when the node it was proposed at applies
		// it (the loop completes its caller right after this batch).
		if _, proposer, _, _, _, err := decodeTestCommand(e.GetData()); err == nil && proposer == m.n.id {
			h.acked = append(h.acked, ackedEntry{index: e.GetIndex(), term: e.GetTerm(), node: m.n.id, at: h.now})
		}
	}
	return m.testKV.Apply(u, ents, out)
}

func (m *scenarioSM) Committed(applied uint64, installed bool) {
	m.testKV.Committed(applied, installed)
	if installed {
		m.n.h.logf("n%d installs a snapshot at index %d", m.n.id, applied)
	}
}

// on makes n the node raft's randomness is drawn for.
func (h *scenarioHarness) on(n *scenarioNode) *scenarioNode {
	scenarioJitter = n.jitter
	return n
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

type scenarioHarness struct {
	t       *testing.T
	cfg     Config
	now     time.Duration // real time
	nodes   []*scenarioNode
	initial uint64 // the bootstrapped voters: 1..initial
	mem     *memNet
	net     []*flight
	// pendingReports are the outcomes of snapshot transfers lost on the
	// way, for their senders.
	pendingReports []pendingReport
	latency        time.Duration
	delay          map[[2]uint64]time.Duration // per link, overrides latency
	cut            map[[2]uint64]bool

	events        []termEvent
	leaders       map[uint64]uint64 // term -> its leader
	committedTerm uint64
	acked         []ackedEntry // writes acknowledged to their client

	out  *strings.Builder
	seen map[string]bool // violations reported

	reads []*scenarioRead // ReadIndex calls not finished yet
	nread int

	transfers []*scenarioTransfer // TransferLeadership calls not finished yet
}

// scenarioTransfer is a TransferLeadership call at a node.
type scenarioTransfer struct {
	n *scenarioNode
	r *transferRequest
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
func (h *scenarioHarness) pollReads() {
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

func (h *scenarioHarness) printf(format string, args ...any) {
	fmt.Fprintf(h.out, format+"\n", args...)
}

// logf prints an event line stamped with the real time.
func (h *scenarioHarness) logf(format string, args ...any) {
	h.printf("[%v] "+format, append([]any{fd(h.now)}, args...)...)
}

func (h *scenarioHarness) violation(key, format string, args ...any) {
	if h.seen[key] {
		return
	}
	h.seen[key] = true
	h.printf("VIOLATION: "+format, args...)
}

// fd formats a duration to the microsecond.
func fd(d time.Duration) string { return d.Round(time.Microsecond).String() }

// scenarioArgs reads a command's arguments.
type scenarioArgs struct {
	h   *scenarioHarness
	t   *testing.T
	d   *datadriven.TestData
	pos []string // the arguments without a value, in order
}

func (a scenarioArgs) node(i int) *scenarioNode {
	if i >= len(a.pos) {
		a.d.Fatalf(a.t, "%s: missing node id", a.d.Cmd)
	}
	id, err := strconv.ParseUint(a.pos[i], 10, 64)
	if err != nil || id == 0 || id > uint64(len(a.h.nodes)) || a.h.node(id).node == nil {
		a.d.Fatalf(a.t, "%s: bad node id %q", a.d.Cmd, a.pos[i])
	}
	return a.h.node(id)
}

func (a scenarioArgs) dur(s string) time.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		a.d.Fatalf(a.t, "%s: %v", a.d.Cmd, err)
	}
	return v
}

func (h *scenarioHarness) handle(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	h.out = &b
	a := scenarioArgs{h: h, t: t, d: d, pos: posArgs(d)}
	if d.Cmd != "nodes" && h.nodes == nil {
		d.Fatalf(t, "%s before nodes", d.Cmd)
	}
	if !h.handleNetwork(a) && !h.handleNode(a) && !h.handleWork(a) {
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	h.check()
	if b.Len() == 0 {
		return "ok"
	}
	return b.String()
}

// handleNetwork runs the commands about time and the network.
func (h *scenarioHarness) handleNetwork(a scenarioArgs) bool {
	switch a.d.Cmd {
	case "advance":
		h.advanceTo(h.now + a.dur(a.pos[0]))
	case "tick":
		n := a.node(0)
		count := 1
		if len(a.pos) > 1 {
			count, _ = strconv.Atoi(a.pos[1])
		}
		if n.frozen {
			a.d.Fatalf(a.t, "tick: n%d is frozen", n.id)
		}
		for range count {
			h.advanceTo(max(h.now, n.nextTickReal()))
		}
	case "deliver":
		var only *scenarioNode
		if len(a.pos) > 0 {
			only = a.node(0)
		}
		h.deliverRound(only, true)
	case "deliver-one":
		n := a.node(0)
		for i, f := range h.net {
			if f.m.GetTo() == n.id && f.at <= h.now && !n.frozen {
				h.net = append(h.net[:i:i], h.net[i+1:]...)
				h.logf("%s", describe(f.m))
				h.deliverTo(n, []*flight{f})
				break
			}
		}
	case "stabilize":
		h.stabilize()
	case "net":
		for _, f := range h.net {
			h.printf("%s, deliverable at %v", describe(f.m), fd(f.at))
		}
	case "drop":
		var typ string
		a.d.ScanArgs(a.t, "type", &typ)
		keep := h.net[:0]
		for _, f := range h.net {
			switch {
			case f.m.GetType().String() != typ:
				keep = append(keep, f)
			case f.snap != nil:
				h.logf("dropped %s", describe(f.m))
				h.lostSnapshot(f)
			default:
				h.logf("dropped %s", describe(f.m))
			}
		}
		h.net = keep
	case "isolate":
		n := a.node(0)
		for _, o := range h.nodes {
			if o != n {
				h.cut[[2]uint64{n.id, o.id}], h.cut[[2]uint64{o.id, n.id}] = true, true
			}
		}
	case "cut":
		x, y := a.node(0), a.node(1)
		h.cut[[2]uint64{x.id, y.id}], h.cut[[2]uint64{y.id, x.id}] = true, true
	case "heal":
		clear(h.cut)
	case "latency":
		if len(a.pos) == 3 {
			x, y := a.node(1), a.node(2)
			h.delay[[2]uint64{x.id, y.id}] = a.dur(a.pos[0])
		} else {
			h.latency = a.dur(a.pos[0])
		}
	default:
		return false
	}
	return true
}

// handleNode runs the commands about a node's process and clock, and the
// printing ones.
func (h *scenarioHarness) handleNode(a scenarioArgs) bool {
	switch a.d.Cmd {
	case "nodes":
		h.handleNodes(a)
	case "join":
		id, err := strconv.ParseUint(a.pos[0], 10, 64)
		if err != nil || id != uint64(len(h.nodes))+1 {
			a.d.Fatalf(a.t, "join: want the next id, %d", len(h.nodes)+1)
		}
		n := h.newScenarioNode(id)
		h.nodes = append(h.nodes, n)
		h.open(n, true)
	case "freeze":
		a.node(0).frozen = true
	case "thaw":
		h.thaw(a.node(0))
	case "restart":
		n := a.node(0)
		h.crash(n)
		h.open(n, n.id > h.initial)
		if n.l.voteGrace.IsZero() {
			h.logf("n%d restarts in term %d, with no vote grace", n.id, n.l.term)
		} else {
			h.logf("n%d restarts in term %d, ignoring votes until %v on its clock", n.id, n.l.term, fd(n.l.voteGrace.Sub(scenarioEpoch)))
		}
	case "clock-rate":
		n := a.node(0)
		var rate float64
		if _, err := fmt.Sscan(a.pos[1], &rate); err != nil || rate <= 0 {
			a.d.Fatalf(a.t, "clock-rate: bad rate %q", a.pos[1])
		}
		n.clock.setRate(h.now, rate)
	case "jitter":
		n := a.node(0)
		j, err := strconv.Atoi(a.pos[1])
		if err != nil || j < 0 || j >= h.cfg.ElectionTicks {
			a.d.Fatalf(a.t, "jitter: want 0 <= N < ElectionTicks, got %q", a.pos[1])
		}
		n.jitter = byte(j)
	case "lease":
		h.printLeases()
	case "status":
		h.printStatus()
	case "members":
		h.printMembers(a.node(0))
	case "get":
		n := a.node(0)
		v, ver, ok, err := n.node.Get([]byte(a.pos[1]))
		switch {
		case err != nil:
			h.printf("n%d: get %s: %v", n.id, a.pos[1], err)
		case !ok:
			h.printf("n%d: %s not found", n.id, a.pos[1])
		default:
			h.printf("n%d: %s=%s (version %d)", n.id, a.pos[1], v, ver)
		}
	default:
		return false
	}
	return true
}

func (h *scenarioHarness) handleNodes(a scenarioArgs) {
	n, err := strconv.Atoi(a.pos[0])
	if err != nil || n < 1 {
		a.d.Fatalf(a.t, "nodes: bad count %q", a.pos[0])
	}
	cfg := withTestRaftLog(Config{Logger: slog.New(slog.DiscardHandler)})
	var stagger, latency time.Duration
	for _, arg := range a.d.CmdArgs[1:] {
		switch arg.Key {
		case "stagger":
			stagger = a.dur(arg.Vals[0])
		case "latency":
			latency = a.dur(arg.Vals[0])
		case "lease-drift":
			arg.Scan(a.t, 0, &cfg.LeaseDrift)
		case "max-apply-bytes":
			arg.Scan(a.t, 0, &cfg.MaxApplyBytes)
		case "snapshot-count":
			arg.Scan(a.t, 0, &cfg.SnapshotCount)
		case "catch-up":
			arg.Scan(a.t, 0, &cfg.SnapshotCatchUpEntries)
		default:
			a.d.Fatalf(a.t, "nodes: unknown argument %s", arg.Key)
		}
	}
	h.setup(cfg.withDefaults(), n, stagger, latency)
	h.printf("election timeout %v, lease %v (ElectionTicks %d, TickInterval %v, LeaseDrift %v)",
		h.cfg.electionTimeout(), h.cfg.leaseDuration(), h.cfg.ElectionTicks, h.cfg.TickInterval, h.cfg.LeaseDrift)
}

// handleWork runs the commands that give a node's loop work.
func (h *scenarioHarness) handleWork(a scenarioArgs) bool {
	switch a.d.Cmd {
	case "campaign":
		n := a.node(0)
		h.iterate(n, func() {
			n.l.tick()
			if err := n.l.rn.Campaign(); err != nil {
				h.logf("n%d: campaign: %v", n.id, err)
			}
		})
	case "propose":
		n := a.node(0)
		if len(a.d.CmdArgs) < 2 || len(a.d.CmdArgs[1].Vals) != 1 {
			a.d.Fatalf(a.t, "propose ID k=v")
		}
		k, v := a.d.CmdArgs[1].Key, a.d.CmdArgs[1].Vals[0]
		var adm Admission
		a.d.MaybeScanArgs(a.t, "admit-term", &adm.Term)
		h.propose(n, k+"="+v, &proposal{admitTerm: adm.Term, data: testCommand(testOpPut, []byte(k), []byte(v))(n.id, n.node.nextReq.Add(1))})
	case "add-learner", "promote", "remove":
		n, id := a.node(0), uint64(0)
		if len(a.pos) < 2 {
			a.d.Fatalf(a.t, "%s LEADER ID", a.d.Cmd)
		}
		id, _ = strconv.ParseUint(a.pos[1], 10, 64)
		typ := map[string]pb.ConfChangeType{"add-learner": pb.ConfChangeAddLearnerNode,
			"promote": pb.ConfChangeAddNode, "remove": pb.ConfChangeRemoveNode}[a.d.Cmd]
		addr := ""
		if typ == pb.ConfChangeAddLearnerNode {
			addr = h.addr(id)
		}
		reqID := n.node.nextReq.Add(1)
		cc := &pb.ConfChange{Type: typ.Enum(), NodeId: new(id),
			Context: appendMemberContext(nil, memberContext{proposer: n.id, reqID: reqID, addr: addr})}
		h.propose(n, fmt.Sprintf("%s %d", a.d.Cmd, id), &proposal{reqID: reqID, cc: cc})
	case "step":
		h.stepDirect(a)
	case "transfer":
		n := a.node(0)
		var to uint64
		a.d.ScanArgs(a.t, "to", &to)
		st := &scenarioTransfer{n: n, r: &transferRequest{to: to, done: make(chan error, 1)}}
		h.transfers = append(h.transfers, st)
		h.logf("n%d moves leadership to n%d", n.id, to)
		h.iterate(n, func() { n.l.takeTransfer(st.r) })
	case "read":
		n := a.node(0)
		h.nread++
		rd := &scenarioRead{id: h.nread, n: n, r: &readRequest{done: make(chan error, 1)}, start: h.now}
		h.reads = append(h.reads, rd)
		h.logf("read %d starts at n%d (applied %d)", rd.id, n.id, n.l.applied)
		n.node.readc <- rd.r
		h.iterate(n, func() { n.l.takeRead(<-n.node.readc) })
	default:
		return false
	}
	return true
}

// propose hands p to n's loop, as Node.Propose and changeMembers do.
func (h *scenarioHarness) propose(n *scenarioNode, what string, p *proposal) {
	if p.reqID == 0 {
		_, _, p.reqID, _, _, _ = decodeTestCommand(p.data)
	}
	p.done = make(chan result, 1)
	n.props = append(n.props, &scenarioProp{what: what, p: p, report: p.cc != nil || p.admitTerm != 0})
	n.node.propc <- p
	h.iterate(n, func() { n.l.takeProposal(<-n.node.propc) })
}

// stepDirect steps a message straight into a node's RawNode, in a loop
// iteration, and prints what the node sends.
func (h *scenarioHarness) stepDirect(a scenarioArgs) {
	n := a.node(0)
	var typ string
	var from uint64
	a.d.ScanArgs(a.t, "type", &typ)
	a.d.ScanArgs(a.t, "from", &from)
	v, ok := pb.MessageType_value[typ]
	if !ok {
		a.d.Fatalf(a.t, "step: unknown message type %q", typ)
	}
	term := n.l.rn.BasicStatus().GetTerm()
	if pb.MessageType(v) == pb.MsgTransferLeader {
		term = 0 // raft sends it without one (and panics forwarding one with a term)
	}
	a.d.MaybeScanArgs(a.t, "term", &term)
	m := &pb.Message{Type: pb.MessageType(v).Enum(), From: new(from), To: new(n.id), Term: new(term)}
	sent := len(h.net)
	h.iterate(n, func() {
		n.l.tick()
		if err := n.l.rn.Step(m); err != nil {
			h.logf("n%d: step %s: %v", n.id, describe(m), err)
		}
	})
	for _, f := range h.net[sent:] {
		h.logf("n%d sends %s", n.id, describe(f.m))
	}
}

// setup starts n voters, bootstrapped from the same member list as Open
// bootstraps them, each on its own in-memory disk.
func (h *scenarioHarness) setup(cfg Config, n int, stagger, latency time.Duration) {
	*h = scenarioHarness{t: h.t, out: h.out, latency: latency}
	h.cfg = cfg
	h.mem = newMemNet()
	h.initial = uint64(n)
	h.cut = make(map[[2]uint64]bool)
	h.delay = make(map[[2]uint64]time.Duration)
	h.leaders = make(map[uint64]uint64)
	h.seen = make(map[string]bool)
	h.committedTerm = 1 // the bootstrap's entries
	for id := uint64(1); id <= h.initial; id++ {
		h.nodes = append(h.nodes, h.newScenarioNode(id))
	}
	for _, sn := range h.nodes {
		h.open(sn, false)
		sn.l.nextTick = sn.l.nextTick.Add(time.Duration(sn.id-1) * stagger)
	}
}

// after reports what n's loop iteration did: finished proposals and reads,
// a lease's first grant, a change of role; and checks the invariants.
func (h *scenarioHarness) after(n *scenarioNode) {
	h.pollProps(n)
	h.pollReads()
	h.pollTransfers()
	h.announceLease(n)
	h.checkApplied()
	h.observe(n)
}

// pollTransfers prints the loop's answer to each TransferLeadership call
// (the Node then waits for the target to lead, which the scenario shows).
func (h *scenarioHarness) pollTransfers() {
	keep := h.transfers[:0]
	for _, st := range h.transfers {
		select {
		case err := <-st.r.done:
			if err != nil {
				h.logf("n%d: moving leadership to n%d fails: %v", st.n.id, st.r.to, err)
			} else {
				h.logf("n%d: stepped down for the move to n%d", st.n.id, st.r.to)
			}
		default:
			keep = append(keep, st)
		}
	}
	h.transfers = keep
}

func (h *scenarioHarness) pollProps(n *scenarioNode) {
	keep := n.props[:0]
	for _, sp := range n.props {
		select {
		case r := <-sp.p.done:
			var nl *NotLeaderError
			switch {
			case errors.As(r.err, &nl):
				h.logf("n%d refuses %s: not the leader", n.id, sp.what)
			case r.err != nil:
				h.logf("n%d: %s: %v", n.id, sp.what, r.err)
			case sp.p.cc != nil && r.index == 0:
				h.logf("n%d: %s: already in effect", n.id, sp.what)
			case sp.report:
				h.logf("n%d: %s applied at index %d", n.id, sp.what, r.index)
			}
		default:
			keep = append(keep, sp)
		}
	}
	n.props = keep
}

// announceLease prints a node's first lease of a term, once the iteration
// that granted it is done.
func (h *scenarioHarness) announceLease(n *scenarioNode) {
	if t := n.announce; t != 0 {
		n.announce = 0
		e := n.leases[t]
		h.logf("n%d holds a lease of term %d until %v on its clock (%v real)", n.id, t, fd(e), fd(n.clock.realAt(e)))
	}
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

// observe prints a change of n's role or term; a new leader is checked
// against the leases of older terms.
func (h *scenarioHarness) observe(n *scenarioNode) {
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
func (h *scenarioHarness) published(n *scenarioNode, term uint64, exp time.Time) {
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
func (h *scenarioHarness) check() {
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
func (h *scenarioHarness) checkApplied() {
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

func (h *scenarioHarness) printLeases() {
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

func (h *scenarioHarness) printStatus() {
	for _, n := range h.live() {
		st := n.l.rn.BasicStatus()
		h.printf("n%d %s term %d lead %d commit %d applied %d", n.id, roleName(st.RaftState), st.GetTerm(), st.Lead, st.HardState.GetCommit(), n.l.applied)
	}
}

// printMembers prints n's view of the group, as its callers see it.
func (h *scenarioHarness) printMembers(n *scenarioNode) {
	st := n.node.Status()
	h.printf("n%d: leader %d, term %d, is leader %v, applied %d", n.id, st.LeaderID, st.Term, st.IsLeader, st.Applied)
	for _, m := range n.node.Members() {
		role := "voter"
		if m.IsLearner {
			role = "learner"
		}
		h.printf("  member %d %s at %s", m.ID, role, m.Addr)
	}
}
