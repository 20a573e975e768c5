package raft

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/raft/peer"
)

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
	waitFor(t, "both logs to be compacted past the follower's", func() bool {
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
	if err := rogue.Send(ctx, peer.AppendHello(nil, peer.Hello{From: x.id, Cluster: f.node.ClusterID(), Addr: x.addr})); err != nil {
		t.Fatal(err)
	}
	hasSession := func() bool { return f.node.peers.(*peer.Set).Sessions(x.id) > 0 }
	waitFor(t, "f to serve x's session", hasSession)

	// f rejoins and installs a snapshot in which x is no member.
	nw.isolate(lead.name, false)
	nw.isolate(s.name, false)
	// The store's membership changes before the applier is told
	// (afterCommit): wait for both.
	waitFor(t, "f to install a snapshot without x", func() bool {
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
