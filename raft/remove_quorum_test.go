package raft

import (
	"errors"
	"testing"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/store"
)

// TestRemoveKeepsAnActiveQuorum: node 1 leads voters 1, 2, 3 and has heard
// from 3 but not from 2 (down). Removing 3, or itself, would leave two
// voters of which one is down: refused as busy, since applied, nothing
// could commit afterwards (not even a change to undo it). Removing 2, the down one, leaves 1
// and 3, both active: allowed.
func TestRemoveKeepsAnActiveQuorum(t *testing.T) {
	ms := etcdraft.NewMemoryStorage()
	if err := ms.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(1)), Term: new(uint64(1)),
		ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}); err != nil {
		t.Fatal(err)
	}
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, CheckQuorum: true,
		Storage: ms, MaxInflightMsgs: 16, Logger: raftLogger{testLogger()}})
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
	step(&pb.Message{Type: pb.MsgHeartbeatResp.Enum(), From: new(uint64(3)), To: new(uint64(1)), Term: term})

	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u := st.NewUpdate()
	if err := u.SetConfState(&pb.ConfState{Voters: []uint64{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(true); err != nil {
		t.Fatal(err)
	}
	l := &loop{n: &Node{id: 1, log: testLogger()}, rn: rn, st: st, sm: nopSM{}}
	for _, tc := range []struct {
		remove uint64
		ok     bool
	}{{3, false}, {1, false}, {2, true}} {
		err := l.checkConfChange(&pb.ConfChange{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(tc.remove)})
		if tc.ok && err != nil {
			t.Errorf("remove %d (down): %v, want allowed", tc.remove, err)
		}
		if !tc.ok && !errors.Is(err, ErrConfChangeBusy) {
			t.Errorf("remove %d with voter 2 down: %v, want ErrConfChangeBusy", tc.remove, err)
		}
	}
}
