package raft

import (
	"testing"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/raft/peer"
)

// logRaft is a follower (node 1 of 1, 2, 3) whose storage holds entries
// 1..3 (terms 1, 1, 2) with 1 committed and applied, as the raft loop has it
// between Readies.
func logRaft(t testing.TB) (*etcdraft.RawNode, *etcdraft.MemoryStorage) {
	t.Helper()
	ms := etcdraft.NewMemoryStorage()
	cs := &pb.ConfState{Voters: []uint64{1, 2, 3}}
	if err := ms.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: cs}}); err != nil {
		t.Fatal(err)
	}
	ents := []*pb.Entry{{Index: new(uint64(1)), Term: new(uint64(1))}, {Index: new(uint64(2)), Term: new(uint64(1))},
		{Index: new(uint64(3)), Term: new(uint64(2))}}
	if err := ms.Append(ents); err != nil {
		t.Fatal(err)
	}
	if err := ms.SetHardState(&pb.HardState{Term: new(uint64(2)), Commit: new(uint64(1))}); err != nil {
		t.Fatal(err)
	}
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: ms,
		Applied: 1, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16, CheckQuorum: true, PreVote: true,
		DisableProposalForwarding: true, Logger: raftLogger{peertest.Logger()}})
	if err != nil {
		t.Fatal(err)
	}
	return rn, ms
}

// TestAdmitState is the loop-side filter's table: what a message claims
// about the log, against a log of 3 entries with 1 committed.
func TestAdmitState(t *testing.T) {
	resp := func(index uint64) *pb.Message {
		return peertest.With(peertest.Msg(pb.MsgAppResp, 2, 1, 2), func(m *pb.Message) { m.Index = new(index) })
	}
	cases := []struct {
		name string
		m    *pb.Message
		want peer.DropReason
	}{
		{"heartbeat within the commit index", peertest.Heartbeat(2, 1, 2, 1), ""},
		{"heartbeat committing the log", peertest.Heartbeat(2, 1, 2, 3), ""},
		{"heartbeat committing past the log", peertest.Heartbeat(2, 1, 2, 4), peer.DropBeyondLog},
		{"the reported heartbeat", peertest.Heartbeat(2, 1, 1000, 1<<40), peer.DropBeyondLog},
		{"append response within the log", resp(3), ""},
		{"append response past the log", resp(4), peer.DropBeyondLog},
		{"other types", peertest.Append(2, 1, 2, 3, 2, 2), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rn, ms := logRaft(t)
			last, _ := ms.LastIndex()
			got, err := admitState(tc.m, rn, last, 1)
			if got != tc.want || (err != nil) != (tc.want != "") {
				t.Fatalf("admitState = %q, %v; want %q", got, err, tc.want)
			}
			if got == "" {
				mustStep(t, rn, tc.m)
			}
		})
	}
}

// mustStep steps m into rn, failing the test (not the binary) on a panic.
func mustStep(t testing.TB, rn *etcdraft.RawNode, m *pb.Message) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("raft panicked on an admitted %s: %v", m.GetType(), r)
		}
	}()
	_ = rn.Step(m)
}

// TestAdmitStateCapsCommitInBatch checks a heartbeat stepped after an
// append that replaced the log's tail, in the same loop iteration, cannot
// commit past raft's (now shorter) log even though the store still holds
// the longer one.
func TestAdmitStateCapsCommitInBatch(t *testing.T) {
	rn, ms := logRaft(t)
	// A leader of term 3 replaces entry 3 (term 2) with nothing after 2.
	mustStep(t, rn, peertest.Append(2, 1, 3, 1, 1, 3))
	last, _ := ms.LastIndex() // still 3: nothing was persisted
	hb := peertest.Heartbeat(2, 1, 3, 3)
	if why, err := admitState(hb, rn, last, 1); err != nil {
		t.Fatalf("heartbeat within the stored log dropped: %s %v", why, err)
	}
	if c := hb.GetCommit(); c > 2 {
		t.Fatalf("heartbeat commit left at %d, past raft's last index 2", c)
	}
	mustStep(t, rn, hb)
}
