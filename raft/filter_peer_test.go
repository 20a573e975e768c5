package raft

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft/peer"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

func refusedCount(t testing.TB, n *Node, why peer.Refusal) float64 {
	return peertest.CounterValue(t, n.metrics.peer.RefusedTotal.WithLabelValues(string(why)))
}

func droppedCount(t testing.TB, n *Node, why peer.DropReason) float64 {
	return peertest.CounterValue(t, n.metrics.peer.DroppedTotal.WithLabelValues(string(why)))
}

// rawPeer opens a connection to addr over tr and sends h and then frames,
// as anyone on the network can; the connection stays open until the test
// ends, unless the node closes it.
func rawPeer(t testing.TB, tr transport.Transport, addr string, h peer.Hello, msgs ...*pb.Message) transport.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := tr.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.Send(ctx, peer.AppendHello(nil, h)); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		f, err := peer.AppendMessage(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.Send(ctx, f) // a refused session may be closed already
	}
	return conn
}

// TestForgedPeer replays forged-peer attacks with a raw client over TCP
// against a single node and every node of a 3-node cluster: hellos of no
// cluster, another cluster, a non-member and the node itself are refused;
// messages of a member session that lie about their sender, are of a type
// peers may not send, or commit past the log (at a forged high term, the
// heartbeat that would crash nodes) are dropped. The nodes stay up, keep their
// leader and term, serve writes, and log and count every peer.Refusal.
func TestForgedPeer(t *testing.T) {
	for _, size := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d-node", size), func(t *testing.T) {
			logs := &peertest.LogCapture{}
			cfg := testConfig()
			cfg.TickInterval = 50 * time.Millisecond // no spurious elections on a busy machine
			cfg.Logger = logs.Logger()
			c := newClusterOn(t, newTCPNet(), size, cfg)
			lead := c.leader()
			c.put("before", "1")
			term := lead.node.Status().Term
			attacker, err := tcp.New(tcp.Config{Node: "attacker"})
			if err != nil {
				t.Fatal(err)
			}
			defer attacker.Close()

			for _, target := range c.running() {
				cluster := target.node.ClusterID()
				member := uint64(1) // another member, when there is one
				if target.id == 1 {
					member = 2
				}
				isMember := size > 1
				memberOutcome := func(d peer.DropReason) (peer.Refusal, peer.DropReason) {
					if !isMember {
						return peer.RefuseNotMember, ""
					}
					return "", d
				}
				bigCommit := peertest.Heartbeat(member, target.id, 1000, 1<<40)
				cases := []struct {
					name string
					h    peer.Hello
					m    *pb.Message
					want func() (peer.Refusal, peer.DropReason)
				}{
					{"the reported attack: no cluster id", peer.Hello{From: member, Addr: "evil:1", Format: store.DataFormat}, bigCommit,
						func() (peer.Refusal, peer.DropReason) { return peer.RefuseClusterMismatch, "" }},
					{"another cluster", peer.Hello{From: member, Cluster: cluster + 1, Addr: "evil:1", Format: store.DataFormat}, bigCommit,
						func() (peer.Refusal, peer.DropReason) { return peer.RefuseClusterMismatch, "" }},
					{"not a member", peer.Hello{From: 99, Cluster: cluster, Addr: "evil:1", Format: store.DataFormat}, peertest.Heartbeat(99, target.id, 1000, 1<<40),
						func() (peer.Refusal, peer.DropReason) { return peer.RefuseNotMember, "" }},
					{"this node itself", peer.Hello{From: target.id, Cluster: cluster, Format: store.DataFormat}, peertest.Heartbeat(target.id, target.id, 1000, 1),
						func() (peer.Refusal, peer.DropReason) { return peer.RefuseSelf, "" }},
					{"a member's heartbeat committing past the log at term 1000", peer.Hello{From: member, Cluster: cluster, Format: store.DataFormat}, bigCommit,
						func() (peer.Refusal, peer.DropReason) { return memberOutcome(peer.DropBeyondLog) }},
					{"a member's session sending as another node", peer.Hello{From: member, Cluster: cluster, Format: store.DataFormat},
						peertest.Heartbeat(99, target.id, 1000, 1), func() (peer.Refusal, peer.DropReason) { return memberOutcome(peer.DropWrongSender) }},
					{"a member's MsgTransferLeader", peer.Hello{From: member, Cluster: cluster, Format: store.DataFormat}, peertest.Msg(pb.MsgTransferLeader, member, target.id, term),
						func() (peer.Refusal, peer.DropReason) { return memberOutcome(peer.DropType) }},
					{"a member's MsgTimeoutNow", peer.Hello{From: member, Cluster: cluster, Format: store.DataFormat}, peertest.Msg(pb.MsgTimeoutNow, member, target.id, term),
						func() (peer.Refusal, peer.DropReason) { return memberOutcome(peer.DropTransfer) }},
					{"a member's vote that claims a leader transfer", peer.Hello{From: member, Cluster: cluster, Format: store.DataFormat},
						peertest.With(peertest.Msg(pb.MsgVote, member, target.id, 1000), func(m *pb.Message) { m.Context = []byte("CampaignTransfer") }),
						func() (peer.Refusal, peer.DropReason) { return memberOutcome(peer.DropTransfer) }},
				}
				for _, tc := range cases {
					refused, dropped := tc.want()
					what := fmt.Sprintf("node %d, %s", target.id, tc.name)
					var before float64
					if refused != "" {
						before = refusedCount(t, target.node, refused)
					} else {
						before = droppedCount(t, target.node, dropped)
					}
					rawPeer(t, attacker, target.addr, tc.h, tc.m)
					wait.For(t, what+": "+string(refused)+string(dropped)+" counted", func() bool {
						if refused != "" {
							return refusedCount(t, target.node, refused) > before
						}
						return droppedCount(t, target.node, dropped) > before
					})
				}
			}

			// Everyone is up, in the same term under the same leader, and
			// writes go through.
			c.put("after", "2")
			for _, tn := range c.running() {
				st := tn.node.Status()
				if st.Term != term || st.LeaderID != lead.id || st.Commit >= 1<<40 {
					t.Errorf("node %d: term %d leader %d commit %d; want term %d leader %d", tn.id, st.Term, st.LeaderID,
						st.Commit, term, lead.id)
				}
				if addr := tn.node.PeerAddr(99); addr != "" {
					t.Errorf("node %d learned the address %q of a stranger", tn.id, addr)
				}
			}
			for _, s := range []string{"refusing peer connection", "reason=cluster_mismatch", "reason=not_member", "reason=self"} {
				if !logs.Contains(s) {
					t.Errorf("no log line with %q", s)
				}
			}
			if size > 1 {
				for _, s := range []string{"dropping peer message", "reason=beyond_log", "reason=wrong_sender", "reason=type_not_allowed", "reason=unauthorized_transfer"} {
					if !logs.Contains(s) {
						t.Errorf("no log line with %q", s)
					}
				}
			}
		})
	}
}

// TestOtherClusterRefused runs two 3-node clusters with the same ids over
// TCP, where cluster A's member 3 is configured at the address of cluster
// B's node 3 (a reused address): B's node refuses A's nodes, logs and
// counts it, and both clusters keep serving. With the same token too: the
// addresses in the initial member lists tell the clusters apart.
func TestOtherClusterRefused(t *testing.T) {
	for _, tc := range []struct{ name, tokenA, tokenB string }{
		{"different tokens", "cluster-a", "cluster-b"},
		{"same token", "same", "same"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nw := newTCPNet()
			logs := &peertest.LogCapture{}
			cfgB := testConfig()
			cfgB.InitialClusterToken, cfgB.Logger = tc.tokenB, logs.Logger()
			b := newClusterOn(t, nw, 3, cfgB)
			b.put("b", "1")
			cfgA := testConfig()
			cfgA.InitialClusterToken = tc.tokenA
			a := newClusterOn(t, nw, 0, cfgA)
			a.reserve(1)
			a.reserve(2)
			b3 := b.nodes[3]
			a.peers[3] = b3.addr
			a.start(1, false)
			a.start(2, false)
			if ia, ib := a.nodes[1].node.ClusterID(), b3.node.ClusterID(); ia == ib {
				t.Fatalf("both clusters have id %x", ia)
			}

			wait.For(t, "B's node 3 to refuse A's nodes", func() bool {
				return refusedCount(t, b3.node, peer.RefuseClusterMismatch) > 0
			})
			a.put("a", "1")
			b.put("b", "2")
			if !logs.Contains("reason=cluster_mismatch") {
				t.Error("B's peer.Refusal was not logged")
			}
			for _, tn := range a.running() {
				if st := tn.node.Status(); st.LeaderID != 1 && st.LeaderID != 2 {
					t.Errorf("A's node %d follows %d", tn.id, st.LeaderID)
				}
			}
			lead := b.leader()
			for _, tn := range b.running() {
				if _, _, ok, _ := tn.node.Get([]byte("a")); ok {
					t.Errorf("B's node %d has A's key", tn.id)
				}
			}
			if ms := lead.node.Members(); len(ms) != 3 {
				t.Errorf("B's members: %v", ms)
			}
		})
	}
}

// TestJoinLearnsClusterID checks a joining node has no cluster id until a
// member contacts it, refuses to learn one from a stranger, learns the
// cluster's from the leader once added, keeps it across a restart, and
// refuses other clusters from then on.
func TestJoinLearnsClusterID(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	lead := c.leader()
	want := lead.node.ClusterID()
	n4 := c.start(4, true)
	if id := n4.node.ClusterID(); id != 0 {
		t.Fatalf("joining node starts with cluster id %x", id)
	}
	attacker := c.net.transport(t, "attacker")
	defer attacker.Close()
	rawPeer(t, attacker, n4.addr, peer.Hello{From: 99, Cluster: want + 1, Format: store.DataFormat})
	wait.For(t, "the stranger to be refused", func() bool { return refusedCount(t, n4.node, peer.RefuseNotMember) > 0 })
	if id := n4.node.ClusterID(); id != 0 {
		t.Fatalf("joining node learned cluster id %x from a stranger", id)
	}

	if err := lead.node.AddMember(ctxT(t), 4, n4.addr); err != nil {
		t.Fatal(err)
	}
	c.caughtUp(n4)
	if id := n4.node.ClusterID(); id != want {
		t.Fatalf("joined node has cluster id %x, want %x", id, want)
	}
	c.stop(4)
	n4 = c.start(4, true)
	if id := n4.node.ClusterID(); id != want {
		t.Fatalf("joined node restarted with cluster id %x, want %x", id, want)
	}
	rawPeer(t, attacker, n4.addr, peer.Hello{From: lead.id, Cluster: want + 1, Format: store.DataFormat})
	wait.For(t, "another cluster to be refused", func() bool {
		return refusedCount(t, n4.node, peer.RefuseClusterMismatch) > 0
	})
	c.caughtUp(n4)
}

// TestRemovedMemberSessionClosed checks removing a member closes the
// sessions it had open, and refuses new ones (as removed, which tells it).
func TestRemovedMemberSessionClosed(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	lead := c.leader()
	gone := uint64(1)
	if lead.id == gone {
		gone = 2
	}
	attacker := c.net.transport(t, "attacker")
	defer attacker.Close()
	h := peer.Hello{From: gone, Cluster: lead.node.ClusterID(), Format: store.DataFormat}
	conn := rawPeer(t, attacker, lead.addr, h, peertest.Msg(pb.MsgTimeoutNow, gone, lead.id, 1))
	wait.For(t, "the member's session to be served", func() bool { return droppedCount(t, lead.node, peer.DropTransfer) > 0 })

	if err := lead.node.RemoveMember(ctxT(t), gone); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := conn.Recv(ctx, nil); ctx.Err() != nil {
		t.Fatalf("the removed member's session is still open: %v", err)
	}
	before := refusedCount(t, lead.node, peer.RefuseRemoved)
	rawPeer(t, attacker, lead.addr, h)
	wait.For(t, "the removed member to be refused", func() bool { return refusedCount(t, lead.node, peer.RefuseRemoved) > before })
}

// TestForgedConfChangeLeavingNoVoter: membership changes that pass
// checkEntry one by one but, committed, would leave no voter (raft panics
// applying them: "removed all voters") are skipped by every node that
// applies them. A joining node, whose configuration is still empty, is
// sent one add-learner entry by a forged member 1; a follower of a
// running cluster is sent, at a higher term, the removal of all three
// members, committed in the same message.
func TestForgedConfChangeLeavingNoVoter(t *testing.T) {
	cc := func(index, term uint64, typ pb.ConfChangeType, node uint64) *pb.Entry {
		return peertest.ConfChangeEntry(index, term, &pb.ConfChange{Type: typ.Enum(), NodeId: new(node)})
	}
	t.Run("joining node", func(t *testing.T) {
		c := newClusterOn(t, newMemNet(), 0, testConfig())
		c.reserve(1) // a configured member that never runs
		n2 := c.start(2, true)
		m := peertest.Msg(pb.MsgApp, 1, 2, 1)
		m.Index, m.LogTerm, m.Commit = new(uint64(0)), new(uint64(0)), new(uint64(1))
		m.Entries = []*pb.Entry{cc(1, 1, pb.ConfChangeAddLearnerNode, 2)}
		attacker := c.net.transport(t, "attacker")
		defer attacker.Close()
		rawPeer(t, attacker, n2.addr, peer.Hello{From: 1, Cluster: 0xdead, Format: store.DataFormat}, m)
		wait.For(t, "the forged entry applied", func() bool { return n2.node.Status().Applied >= 1 })
		if err := n2.node.Failure(); err != nil {
			t.Fatalf("node failed: %v", err)
		}
		if got := n2.node.Members(); len(got) != 0 {
			t.Fatalf("members after a skipped change: %v", got)
		}
	})
	t.Run("follower", func(t *testing.T) {
		c := newClusterOn(t, newMemNet(), 3, testConfig())
		lead := c.leader()
		c.put("k", "v")
		target := c.follower(lead)
		c.caughtUp(target)
		before := target.node.Members()
		st := target.node.Status()
		last, lastTerm, term := st.Commit, st.Term, st.Term+1000 // a quiet cluster: the log ends at the commit
		m := peertest.Msg(pb.MsgApp, lead.id, target.id, term)
		m.Index, m.LogTerm, m.Commit = new(last), new(lastTerm), new(last+3)
		// The target's own removal last: it is the one skipped (a node
		// that applies its own removal stops, removal.go).
		var order []uint64
		for id := uint64(1); id <= 3; id++ {
			if id != target.id {
				order = append(order, id)
			}
		}
		order = append(order, target.id)
		m.Entries = []*pb.Entry{
			cc(last+1, term, pb.ConfChangeRemoveNode, order[0]),
			cc(last+2, term, pb.ConfChangeRemoveNode, order[1]),
			cc(last+3, term, pb.ConfChangeRemoveNode, order[2]),
		}
		attacker := c.net.transport(t, "attacker")
		defer attacker.Close()
		rawPeer(t, attacker, target.addr, peer.Hello{From: lead.id, Cluster: target.node.ClusterID(), Format: store.DataFormat}, m)
		// (Were they never applied, the peer filter dropped them: this test
		// needs them to reach raft.)
		wait.For(t, "the forged entries applied", func() bool { return target.node.Status().Applied >= last+3 })
		if err := target.node.Failure(); err != nil {
			t.Fatalf("node failed: %v", err)
		}
		// The first two removals applied; the third was skipped.
		if got := target.node.Members(); len(got) != 1 || len(before) != 3 {
			t.Fatalf("members %v -> %v, want the one the skipped removal left", before, got)
		}
	})
}

func TestLeavesNoVoter(t *testing.T) {
	voters := func(ids ...uint64) map[uint64]struct{} {
		m := map[uint64]struct{}{}
		for _, id := range ids {
			m[id] = struct{}{}
		}
		return m
	}
	for _, tc := range []struct {
		voters map[uint64]struct{}
		typ    pb.ConfChangeType
		node   uint64
		want   bool
	}{
		{voters(), pb.ConfChangeAddLearnerNode, 2, true},
		{voters(), pb.ConfChangeAddNode, 2, false},
		{voters(), pb.ConfChangeUpdateNode, 2, true},
		{voters(1), pb.ConfChangeRemoveNode, 1, true},
		{voters(1), pb.ConfChangeAddLearnerNode, 1, true},
		{voters(1), pb.ConfChangeRemoveNode, 2, false},
		{voters(1, 2), pb.ConfChangeRemoveNode, 1, false},
		{voters(1), pb.ConfChangeAddNode, 1, false},
	} {
		cc := &pb.ConfChange{Type: tc.typ.Enum(), NodeId: new(tc.node)}
		if got := leavesNoVoter(tc.voters, cc); got != tc.want {
			t.Errorf("%v, %s %d: leavesNoVoter = %v, want %v", tc.voters, tc.typ, tc.node, got, tc.want)
		}
	}
}
