package raft

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft/peer"
)

// Membership: changes under load, learners promoted, a removal that keeps
// an active quorum, a removed node reporting no leader, and a member
// removed by a snapshot install losing its sessions.

// leadingLoop is a loop whose node 1 leads voters 1, 2, 3 (a raw node
// and a store, no goroutines) and has heard from the voters heard since
// its election, so that checkConfChange can be asked.
func leadingLoop(t *testing.T, heard ...uint64) *loop {
	t.Helper()
	ms := etcdraft.NewMemoryStorage()
	if err := ms.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(1)), Term: new(uint64(1)),
		ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}); err != nil {
		t.Fatal(err)
	}
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, CheckQuorum: true,
		Storage: ms, MaxInflightMsgs: 16, Logger: raftLogger{peertest.Logger()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rn.Campaign(); err != nil {
		t.Fatal(err)
	}
	advance := func() { // store and acknowledge a Ready, as the loop does
		t.Helper()
		rd := rn.Ready()
		if err := ms.Append(rd.Entries); err != nil {
			t.Fatal(err)
		}
		rn.Advance(rd)
	}
	advance() // the candidate's own vote counts once it is durable
	term := rn.Status().Term
	step := func(m *pb.Message) {
		t.Helper()
		if err := rn.Step(m); err != nil {
			t.Fatal(err)
		}
	}
	step(&pb.Message{Type: pb.MsgVoteResp.Enum(), From: new(uint64(3)), To: new(uint64(1)), Term: term})
	if rn.Status().RaftState != etcdraft.StateLeader {
		t.Fatalf("node 1 is %v, want leader", rn.Status().RaftState)
	}
	for _, id := range heard {
		step(&pb.Message{Type: pb.MsgHeartbeatResp.Enum(), From: new(uint64(id)), To: new(uint64(1)), Term: term})
	}

	st, err := store.Open(t.TempDir(), testStoreOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	u := st.NewUpdate()
	if err := u.SetConfState(&pb.ConfState{Voters: []uint64{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(true); err != nil {
		t.Fatal(err)
	}
	return &loop{n: &Node{id: 1, log: peertest.Logger()}, rn: rn, st: st, sm: nopSM{}}
}

// TestRemoveKeepsAnActiveQuorum: node 1 leads voters 1, 2, 3 and has heard
// from 3 but not from 2 (down). Removing 3, or itself, would leave two
// voters of which one is down: refused as busy, since applied, nothing
// could commit afterwards (not even a change to undo it). Removing 2, the down one, leaves 1
// and 3, both active: allowed.
func TestRemoveKeepsAnActiveQuorum(t *testing.T) {
	l := leadingLoop(t, 3)
	for _, tc := range []struct {
		remove uint64
		ok     bool
	}{{3, false}, {1, false}, {2, true}} {
		err := l.checkConfChange(&pb.ConfChange{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(tc.remove)})
		if tc.ok && err != nil {
			t.Errorf("remove %d (down): %v, want allowed", tc.remove, err)
		}
		if !tc.ok && (!errors.Is(err, ErrNoQuorum) || !strings.Contains(err.Error(), "fewer than a quorum")) {
			t.Errorf("remove %d with voter 2 down: %v, want ErrNoQuorum saying why", tc.remove, err)
		}
	}
}

// TestAddVoterKeepsAnActiveQuorum: node 1 leads voters 1, 2, 3. Having
// heard from 3 but not from 2 (down), adding voter 4 would make four
// voters of which two were heard from, fewer than a quorum: refused.
// Having heard from both, allowed. A voter or learner already there, or
// an address in use, is refused before the quorum is counted.
func TestAddVoterKeepsAnActiveQuorum(t *testing.T) {
	add := func(id uint64, addr string) *pb.ConfChange {
		return &pb.ConfChange{Type: pb.ConfChangeAddNode.Enum(), NodeId: new(id),
			Context: appendMemberContext(nil, memberContext{proposer: 1, reqID: 1, addr: addr})}
	}
	for _, tc := range []struct {
		name  string
		heard []uint64
		cc    *pb.ConfChange
		want  error
	}{
		{"two of four heard from", []uint64{3}, add(4, "127.0.0.1:9"), ErrNoQuorum},
		{"three of four heard from", []uint64{2, 3}, add(4, "127.0.0.1:9"), nil},
		{"a voter already", []uint64{2, 3}, add(2, "127.0.0.1:9"), ErrMemberExists},
	} {
		err := leadingLoop(t, tc.heard...).checkConfChange(tc.cc)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestRemovedNodeReportsNoLeader: a node that has applied its own removal
// reports no leader, though etcd raft still names the last one it knew
// (else a removed follower would keep accepting watches that can never see
// another event, and keep publishing the old leader as its region's hint).
// A joining node that is not in its address book yet is not removed.
func TestRemovedNodeReportsNoLeader(t *testing.T) {
	type change struct{ add, remove []uint64 } // applied to the address book
	for _, tc := range []struct {
		name   string
		phases []change // one before each publishStatus
		want   []uint64 // LeaderID after each
	}{
		{"a member", []change{{add: []uint64{1, 2, 3}}, {}}, []uint64{3, 3}},
		{"removed", []change{{add: []uint64{1, 2, 3}}, {remove: []uint64{1}}}, []uint64{3, 0}},
		{"another removed", []change{{add: []uint64{1, 2, 3}}, {remove: []uint64{2}}}, []uint64{3, 3}},
		{"joining", []change{{}, {add: []uint64{2, 3}}, {add: []uint64{1}}}, []uint64{3, 3, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := store.Open(t.TempDir(), testStoreOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			m, _ := newMetrics(nil)
			l := &loop{n: &Node{id: 1, log: peertest.Logger(), metrics: m}, st: st, sm: nopSM{}, lead: 3, term: 2}
			for i, ch := range tc.phases {
				u := st.NewUpdate()
				for _, id := range ch.remove {
					if err := u.RemoveMember(id); err != nil {
						t.Fatal(err)
					}
				}
				for _, id := range ch.add {
					if err := u.SetMember(store.Member{ID: id, Addr: "127.0.0.1:1"}); err != nil {
						t.Fatal(err)
					}
				}
				if err := u.Commit(true); err != nil {
					t.Fatal(err)
				}
				l.publishStatus()
				if got := l.n.Status().LeaderID; got != tc.want[i] {
					t.Fatalf("phase %d (%+v): LeaderID %d, want %d", i, ch, got, tc.want[i])
				}
			}
		})
	}
}

// TestSnapshotInstallEndsRemovedMembersSessions: a follower that learns of
// a member's removal by installing a snapshot (it was away while the member
// was removed and the log compacted) must stop serving that member's
// sessions, as one that applies the removal entry does (peer.Set.Remove). A
// session the removed member opened while the follower still counted it as
// a member otherwise stays up, and its raft messages keep reaching raft.
func TestSnapshotInstallEndsRemovedMembersSessions(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotCount, cfg.SnapshotCatchUpEntries, cfg.SnapshotChunkSize = 20, 5, 512
	nw := newMemNet()
	c := newClusterOn(t, nw, 4, cfg)
	ctx := ctxT(t)
	lead := c.leader()
	var f, x, s *testNode // the lagging follower, the member removed, the other one
	for _, tn := range c.running() {
		switch {
		case tn == lead:
		case f == nil:
			f = tn
		case x == nil:
			x = tn
		default:
			s = tn
		}
	}
	c.put("before", "1")
	c.caughtUp(f)
	fApplied := f.node.Status().Applied
	c.stop(f.id)

	// x is removed while f is down; the log moves on past a snapshot.
	if retried, err := c.atLeader(func(n *Node) error { return n.RemoveMember(ctx, x.id) }); err != nil && !(retried && errors.Is(err, ErrMemberNotFound)) {
		t.Fatal(err)
	}
	c.stop(x.id)
	for i := range 150 {
		c.put(fmt.Sprintf("key%03d", i), fmt.Sprintf("value-%d-%s", i, make([]byte, 40)))
	}
	lead = c.leader()
	// Whichever of the two leads when f is back, its log must start past
	// f's: both compact on their own.
	var first uint64
	wait.For(t, "both logs to be compacted past the follower's", func() bool {
		first = math.MaxUint64
		for _, tn := range c.running() { // f and x are stopped
			fi, _ := tn.node.store.FirstIndex()
			first = min(first, fi)
		}
		return first > fApplied+1
	})

	// f comes back, cut off from the cluster for now: by its own disk x is
	// still a member, so it accepts a session from x.
	nw.isolate(lead.name, true)
	nw.isolate(s.name, true)
	f = c.start(f.id, false)
	if applied := f.node.Status().Applied; first <= applied+1 {
		t.Fatalf("leader's log starts at %d, follower applied %d: no snapshot needed", first, applied)
	}
	rogue, err := nw.endpoint("rogue").Dial(ctx, f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Close()
	if err := rogue.Send(ctx, peer.AppendHello(nil, peer.Hello{From: x.id, Cluster: f.node.ClusterID(), Addr: x.addr, Format: store.DataFormat})); err != nil {
		t.Fatal(err)
	}
	hasSession := func() bool { return f.node.peers.(*peer.Set).Sessions(x.id) > 0 }
	wait.For(t, "f to serve x's session", hasSession)

	// f rejoins and installs a snapshot in which x is no member.
	nw.isolate(lead.name, false)
	nw.isolate(s.name, false)
	// The store's membership changes before the applier is told
	// (afterCommit): wait for both.
	wait.For(t, "f to install a snapshot without x", func() bool {
		_, restores, _ := f.app.snapshot()
		return restores > 0 && !f.node.isMember(x.id)
	})
	if !f.node.store.Removed(x.id) {
		t.Errorf("the snapshot f installed carried no tombstone for removed member %d", x.id)
	}
	deadline := time.Now().Add(3 * time.Second)
	for hasSession() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !hasSession() {
		return
	}
	// The removed member's session is still served: show that what it
	// sends still steers raft (a heartbeat of a later term makes f follow
	// the removed node).
	st := f.node.Status()
	m := &pb.Message{Type: new(pb.MsgHeartbeat), From: new(x.id), To: new(f.id), Term: new(st.Term + 100)}
	frame, _ := peer.AppendMessage(nil, m)
	sendErr := rogue.Send(context.Background(), frame)
	time.Sleep(200 * time.Millisecond)
	t.Fatalf("after installing a snapshot without member %d, node %d still serves its session "+
		"(send: %v; f's leader is now %d, term %d -> %d)", x.id, f.id, sendErr, f.node.Status().LeaderID, st.Term, f.node.Status().Term)
}

func TestMembershipChanges(t *testing.T) {
	forNetworks(t, func(t *testing.T, nw network) {
		c := newClusterOn(t, nw, 3, testConfig())
		ctx := ctxT(t)
		c.put("a", "1")

		// A fourth node joins as a learner, then becomes a voter.
		n4 := c.start(4, true)
		add := func(n *Node) error { return n.AddMember(ctx, 4, n4.addr) }
		if retried, err := c.atLeader(add); err != nil && !(retried && errors.Is(err, ErrMemberExists)) {
			t.Fatal(err)
		}
		if _, err := c.atLeader(add); !errors.Is(err, ErrMemberExists) {
			t.Fatalf("adding 4 twice: %v", err)
		}
		checkMembers(t, c.leader().node, c.members(4))
		c.caughtUp(n4)
		if v, _, ok, _ := n4.node.Get([]byte("a")); !ok || string(v) != "1" {
			t.Fatalf("learner did not receive the log: %q %v", v, ok)
		}
		if retried, err := c.atLeader(func(n *Node) error { return n.PromoteMember(ctx, 4) }); err != nil && !(retried && errors.Is(err, ErrNotLearner)) {
			t.Fatal(err)
		}
		checkMembers(t, c.leader().node, c.members())

		// Remove a follower other than the new node.
		var gone uint64
		for _, id := range []uint64{1, 2, 3} {
			if id != c.leader().id {
				gone = id
				break
			}
		}
		remove := func(n *Node) error { return n.RemoveMember(ctx, gone) }
		if retried, err := c.atLeader(remove); err != nil && !(retried && errors.Is(err, ErrMemberNotFound)) {
			t.Fatal(err)
		}
		if _, err := c.atLeader(remove); !errors.Is(err, ErrMemberNotFound) {
			t.Fatalf("removing %d twice: %v", gone, err)
		}
		// Its id is never a member again, at any address.
		for _, addr := range []string{c.nodes[gone].addr, "127.0.0.1:1"} {
			if _, err := c.atLeader(func(n *Node) error { return n.AddMember(ctx, gone, addr) }); !errors.Is(err, ErrMemberRemoved) {
				t.Fatalf("adding removed member %d back at %s: %v", gone, addr, err)
			}
		}
		c.stop(gone)
		delete(c.peers, gone)
		c.put("b", "2")
		for _, tn := range c.running() {
			c.caughtUp(tn)
			if ms := tn.node.Members(); len(ms) != 3 {
				t.Errorf("node %d members = %v", tn.id, ms)
			}
		}
		// The joined node knows the membership (addresses included) after a
		// restart, from its own disk.
		c.stop(4)
		n4 = c.start(4, true)
		for _, m := range n4.node.Members() {
			if m.Addr != c.nodes[m.ID].addr {
				t.Errorf("restarted node 4 has member %v", m)
			}
		}
		c.caughtUp(n4)
		if v, _, ok, _ := n4.node.Get([]byte("b")); !ok || string(v) != "2" {
			t.Fatalf("node 4 after restart: b = %q %v", v, ok)
		}
	})
}

// TestPromoteAbsentLearnerRefused: PromoteMember of a learner the leader
// has never heard from (its node was never started) is refused, saying
// so, without waiting for the caller's deadline. On a log shorter than
// promoteSlack such a learner (match 0) passed the check; promoted, it
// made a one-node cluster two voters, one absent, and nothing committed
// any more. Promoting a voter is refused too (as etcd does).
func TestPromoteAbsentLearnerRefused(t *testing.T) {
	c := newCluster(t, 1, testConfig())
	c.put("a", "1")
	n2 := c.reserve(2) // known address, never started
	lead := c.leader().node
	if err := lead.AddMember(ctxT(t), 2, n2.addr); err != nil {
		t.Fatal(err)
	}
	err := lead.PromoteMember(ctxT(t), 2)
	if !errors.Is(err, ErrLearnerNotReady) || !strings.Contains(err.Error(), "learner 2 has not been heard from") {
		t.Fatalf("PromoteMember of a learner that never ran = %v; want ErrLearnerNotReady saying it was never heard from", err)
	}
	for _, m := range lead.Members() {
		if m.ID == 2 && !m.IsLearner {
			t.Fatalf("node 2 was promoted: %+v", lead.Members())
		}
	}
	c.put("b", "2") // the cluster still commits
	err = lead.PromoteMember(ctxT(t), lead.id)
	if !errors.Is(err, ErrNotLearner) || !strings.Contains(err.Error(), "is already a voter") {
		t.Fatalf("PromoteMember of a voter = %v; want ErrNotLearner saying it is already a voter", err)
	}
}

// TestLaggingFollowerKeepsPromotedAddr: a follower that applies a node's
// addition as a learner and its promotion in one batch records the address
// the addition carried, as every other node does. It took the address
// from its in-memory address book, which the batch had not updated yet,
// and stored an empty one: after a restart it could not dial the member.
func TestLaggingFollowerKeepsPromotedAddr(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	ctx := ctxT(t)
	c.put("a", "1")
	lead := c.leader()
	f := c.follower(lead)
	c.net.isolate(f.name, true)

	n4 := c.start(4, true)
	if retried, err := c.atLeader(func(n *Node) error { return n.AddMember(ctx, 4, n4.addr) }); err != nil && !(retried && errors.Is(err, ErrMemberExists)) {
		t.Fatal(err)
	}
	c.caughtUp(n4)
	if retried, err := c.atLeader(func(n *Node) error { return n.PromoteMember(ctx, 4) }); err != nil && !(retried && errors.Is(err, ErrNotLearner)) {
		t.Fatal(err)
	}
	c.net.isolate(f.name, false)
	c.put("b", "2")
	c.caughtUp(f)
	want := c.members()
	if got := f.node.Members(); !slicesEqual(got, want) {
		t.Errorf("lagging follower %d: Members = %+v, want %+v", f.id, got, want)
	}
	// After a restart the follower knows node 4's address only from its disk
	// (its Config.Peers predates node 4).
	c.stop(f.id)
	peers := c.peers
	c.peers = map[uint64]string{1: peers[1], 2: peers[2], 3: peers[3]}
	f = c.start(f.id, false)
	c.peers = peers
	if a := f.node.PeerAddr(4); a != n4.addr {
		t.Errorf("restarted follower %d: PeerAddr(4) = %q, want %q", f.id, a, n4.addr)
	}
}

// TestAddVoter: AddVoter adds a voter at once: with every voter of three
// running, the fourth counts towards the quorum before its node starts,
// the group keeps committing, and the node, started to join, learns the
// log as a voter. Adding it again is refused as existing.
func TestAddVoter(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	ctx := ctxT(t)
	c.put("a", "1")
	n4 := c.reserve(4) // known address, not started yet
	add := func(n *Node) error { return n.AddVoter(ctx, 4, n4.addr) }

	if retried, err := c.atLeader(add); err != nil && !(retried && errors.Is(err, ErrMemberExists)) {
		t.Fatal(err)
	}
	checkMembers(t, c.leader().node, c.members())
	c.put("b", "2") // three of four voters commit
	if _, err := c.atLeader(add); !errors.Is(err, ErrMemberExists) {
		t.Fatalf("adding 4 twice: %v", err)
	}
	c.start(4, true)
	c.caughtUp(n4)
	if v, _, ok, _ := n4.node.Get([]byte("b")); !ok || string(v) != "2" {
		t.Fatalf("new voter did not receive the log: %q %v", v, ok)
	}
	checkMembers(t, n4.node, c.members())
}

// TestAddVoterToOneVoterRefused: a one-voter group refuses AddVoter (its
// leader would lose its quorum until the new node ran) and still commits;
// a learner added and promoted is the way there.
func TestAddVoterToOneVoterRefused(t *testing.T) {
	c := newCluster(t, 1, testConfig())
	n2 := c.reserve(2)
	lead := c.leader().node
	if err := lead.AddVoter(ctxT(t), 2, n2.addr); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("AddVoter to a one-voter group = %v, want ErrNoQuorum", err)
	}
	if len(lead.Members()) != 1 {
		t.Fatalf("members %+v, want the one voter", lead.Members())
	}
	c.put("a", "1")
}

// TestUpdateMemberMovesAPeer: UpdateMember records a member's new peer
// address on every node; the member's node, restarted at it, rejoins
// there: the others dial it at the new address and it catches up. An
// unknown member, and another member's address, are refused.
func TestUpdateMemberMovesAPeer(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	ctx := ctxT(t)
	c.put("a", "1")
	moved := c.follower(c.leader())
	c.stop(moved.id)
	tr := c.net.transport(t, moved.name+"-moved")
	ln, err := tr.Listen(c.net.listenAddr(moved.name + "-moved"))
	if err != nil {
		t.Fatal(err)
	}
	moved.tr, moved.ln, moved.addr = tr, ln, ln.Addr()
	update := func(n *Node) error { return n.UpdateMember(ctx, moved.id, moved.addr) }
	if _, err := c.atLeader(update); err != nil {
		t.Fatal(err)
	}
	c.put("b", "2") // two of three voters
	// Restarted with the cluster's initial members (which name the
	// cluster), listening at its new address.
	c.start(moved.id, false)
	c.peers[moved.id] = moved.addr
	c.put("c", "3")
	c.caughtUp(moved)
	if v, _, ok, _ := moved.node.Get([]byte("c")); !ok || string(v) != "3" {
		t.Fatalf("moved member did not catch up at its new address: %q %v", v, ok)
	}
	for _, tn := range c.running() {
		checkMembers(t, tn.node, c.members())
	}
	for _, tc := range []struct {
		name string
		id   uint64
		addr string
		want error
	}{
		{"unknown member", 9, "127.0.0.1:9", ErrMemberNotFound},
		{"another member's address", moved.id, c.peers[c.leader().id], ErrAddrInUse},
	} {
		if _, err := c.atLeader(func(n *Node) error { return n.UpdateMember(ctx, tc.id, tc.addr) }); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
