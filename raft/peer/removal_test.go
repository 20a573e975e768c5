package peer

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/transport/tcp"
)

// tcpSet is member id's peer layer over h, on a TCP listener of its own
// that serves peer sessions; it returns the set and its address.
func tcpSet(t *testing.T, id uint64, h *fakeHost) (*Set, string) {
	t.Helper()
	tr, err := tcp.New(tcp.Config{Node: fmt.Sprintf("n%d", id)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, Config{ID: id, Addr: ln.Addr(), ClusterID: 42, Transport: tr, Store: openStore(t), Host: h,
		Logger: slog.New(slog.DiscardHandler), TickInterval: 10 * time.Millisecond, ElectionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		peertest.AcceptPeers(ctx, ln, IsHello, s.Serve)
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		<-served
		s.Close()
		tr.Close()
	})
	return s, ln.Addr()
}

// TestRemovedMemberIsToldOnItsNextSession: a member that refuses the
// session of a node it removed answers the hello with the removal, and the
// node learns it was removed (Host.Removed, naming the member): how a node
// cut off during its removal, or restarted after it, learns. Without
// refuseRemoved's answer, or watchRefusal reading it, the node is refused
// without end (etcd's removed member gets ErrMemberRemoved).
func TestRemovedMemberIsToldOnItsNextSession(t *testing.T) {
	h1, h2 := newFakeHost(), newFakeHost()
	s1, addr1 := tcpSet(t, 1, h1)
	s2, _ := tcpSet(t, 2, h2)
	h1.mu.Lock()
	h1.members[2], h1.removed[2] = false, true
	h1.mu.Unlock()
	h2.mu.Lock()
	h2.addrs[1] = addr1
	h2.mu.Unlock()
	wait.For(t, "node 2 to be told it was removed", func() bool {
		s2.Send(peertest.Msg(pb.MsgHeartbeatResp, 2, 1, 5)) // any message opens a session
		// Every session the member refuses tells the node (a real node
		// stops at the first): node 2 may redial before it reads the first.
		return slices.Equal(slices.Compact(h2.told()), []uint64{1})
	})
	if n := refusedCount(t, s1, RefuseRemoved); n == 0 {
		t.Fatal("the refusal was not counted as removed")
	}
}

// TestRemovalFarewell: a member that applies the removal of a node tells
// it (the farewell), the node stops (Host.Removed) and closes the session,
// and the member sees that as the acknowledgement (FarewellDone): the
// leader's RemoveMember waits for it, so that no read of the removed node
// follows an acknowledged removal. Without the farewell the removed
// follower is never told (the leader stops talking to it).
func TestRemovalFarewell(t *testing.T) {
	h1, h2 := newFakeHost(), newFakeHost()
	s1, _ := tcpSet(t, 1, h1)
	_, addr2 := tcpSet(t, 2, h2)
	h1.mu.Lock()
	h1.members[2], h1.removed[2] = false, true
	h1.mu.Unlock()
	s1.Remove(2, addr2)
	ctx, cancel := context.WithTimeout(context.Background(), wait.Timeout)
	defer cancel()
	if !s1.FarewellDone(ctx, 2) {
		t.Fatal("the removed member did not acknowledge its farewell")
	}
	if got := h2.told(); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("removed member was told by %v, want [1]", got)
	}
	// A member removed elsewhere (not removed here) is not told.
	s1.Remove(3, "127.0.0.1:1")
	if s1.FarewellDone(ctx, 3) {
		t.Fatal("a farewell to a member that was not removed")
	}
}

// TestRemovalFrameForAnotherMemberIsIgnored: an 'R' frame naming some
// other id changes nothing here (a member only ever tells the removed
// member itself).
func TestRemovalFrameForAnotherMemberIsIgnored(t *testing.T) {
	h := newFakeHost()
	s := testSet(t, Config{}, h)
	r := s.NewReader(2)
	if err := r.Handle(appendRemoved(nil, 3)); err != nil {
		t.Fatalf("frame naming member 3: %v", err)
	}
	if len(h.told()) != 0 {
		t.Fatalf("told by %v", h.told())
	}
	if err := r.Handle(appendRemoved(nil, 1)); err == nil || !slices.Equal(h.told(), []uint64{2}) {
		t.Fatalf("frame naming this member: err %v, told by %v", err, h.told())
	}
}
