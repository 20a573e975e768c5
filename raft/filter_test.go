package raft

import (
	"errors"
	"math"
	"testing"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/store"
)

// msg builds a message of type t from node from to node to at term.
func msg(t pb.MessageType, from, to, term uint64) *pb.Message {
	return &pb.Message{Type: t.Enum(), From: new(from), To: new(to), Term: new(term)}
}

func heartbeat(from, to, term, commit uint64) *pb.Message {
	m := msg(pb.MsgHeartbeat, from, to, term)
	m.Commit = new(commit)
	return m
}

// appendMsg is an append after (index, logTerm) of entries at the terms
// given, numbered from index+1.
func appendMsg(from, to, term, index, logTerm uint64, terms ...uint64) *pb.Message {
	m := msg(pb.MsgApp, from, to, term)
	m.Index, m.LogTerm = new(index), new(logTerm)
	for i, et := range terms {
		m.Entries = append(m.Entries, &pb.Entry{Index: new(index + 1 + uint64(i)), Term: new(et)})
	}
	return m
}

func confChangeEntry(index, term uint64, cc *pb.ConfChange) *pb.Entry {
	data, err := proto.Marshal(cc)
	if err != nil {
		panic(err)
	}
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryConfChange.Enum(), Data: data}
}

func with(m *pb.Message, f func(m *pb.Message)) *pb.Message {
	f(m)
	return m
}

// TestCheckPeerMessage is the session-side filter's table: every type a
// peer may not send, addressing, and the fields raft takes on faith.
func TestCheckPeerMessage(t *testing.T) {
	const from, self = 2, 1
	readIndex := func(n int) *pb.Message {
		m := msg(pb.MsgReadIndex, from, self, 0)
		for range n {
			m.Entries = append(m.Entries, &pb.Entry{Data: []byte("ctx")})
		}
		return m
	}
	snap := func(cs *pb.ConfState, data []byte) *pb.Message {
		m := snapMsg(10, 2)
		m.Snapshot.Metadata.ConfState, m.Snapshot.Data = cs, data
		return m
	}
	members := store.EncodeMembers(testMembers)
	cases := []struct {
		name string
		m    *pb.Message
		want dropReason // "" passes
	}{
		{"heartbeat", heartbeat(from, self, 5, 1<<40), ""}, // its commit is the loop's to check
		{"heartbeat response", msg(pb.MsgHeartbeatResp, from, self, 5), ""},
		{"append", appendMsg(from, self, 5, 3, 2, 2, 5, 5), ""},
		{"empty append", appendMsg(from, self, 5, 3, 2), ""},
		{"append response", with(msg(pb.MsgAppResp, from, self, 5), func(m *pb.Message) { m.Index = new(uint64(9)) }), ""},
		{"append rejection", with(msg(pb.MsgAppResp, from, self, 5), func(m *pb.Message) {
			m.Index, m.Reject, m.RejectHint = new(uint64(9)), new(true), new(uint64(4))
		}), ""},
		{"vote", msg(pb.MsgVote, from, self, 6), ""},
		{"vote response", msg(pb.MsgVoteResp, from, self, 6), ""},
		{"pre-vote", msg(pb.MsgPreVote, from, self, 6), ""},
		{"pre-vote response", msg(pb.MsgPreVoteResp, from, self, 6), ""},
		{"read index", readIndex(1), ""},
		{"read index response", with(msg(pb.MsgReadIndexResp, from, self, 5), func(m *pb.Message) {
			m.Entries = []*pb.Entry{{Data: []byte("ctx")}}
		}), ""},
		{"snapshot", snapMsg(10, 2), ""},
		{"conf change entry", with(appendMsg(from, self, 5, 3, 2), func(m *pb.Message) {
			m.Entries = []*pb.Entry{confChangeEntry(4, 5, &pb.ConfChange{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: new(uint64(4))})}
		}), ""},

		// Types a peer may not send.
		{"proposal", with(msg(pb.MsgProp, from, self, 0), func(m *pb.Message) { m.Entries = []*pb.Entry{{Data: []byte("x")}} }), dropType},
		{"leader transfer", msg(pb.MsgTransferLeader, from, self, 5), dropType},
		{"timeout now", msg(pb.MsgTimeoutNow, from, self, 5), dropType},
		{"hup", msg(pb.MsgHup, from, self, 0), dropType},
		{"beat", msg(pb.MsgBeat, from, self, 0), dropType},
		{"check quorum", msg(pb.MsgCheckQuorum, from, self, 0), dropType},
		{"unreachable", msg(pb.MsgUnreachable, from, self, 0), dropType},
		{"snapshot status", msg(pb.MsgSnapStatus, from, self, 0), dropType},
		{"storage append", msg(pb.MsgStorageAppend, from, self, 5), dropType},
		{"storage append response", msg(pb.MsgStorageAppendResp, from, self, 5), dropType},
		{"storage apply", msg(pb.MsgStorageApply, from, self, 5), dropType},
		{"storage apply response", msg(pb.MsgStorageApplyResp, from, self, 5), dropType},
		{"forget leader", msg(pb.MsgForgetLeader, from, self, 0), dropType},
		{"unknown type", msg(pb.MessageType(99), from, self, 5), dropType},

		// Addressing.
		{"another sender", heartbeat(3, self, 5, 1), dropWrongSender},
		{"sender 0", heartbeat(0, self, 5, 1), dropWrongSender},
		{"another recipient", heartbeat(from, 3, 5, 1), dropWrongTo},

		// Fields.
		{"no term", heartbeat(from, self, 0, 1), dropMalformed},
		{"read index with a term", with(readIndex(1), func(m *pb.Message) { m.Term = new(uint64(1000)) }), dropMalformed},
		{"read index without context", readIndex(0), dropMalformed},
		{"read index with two contexts", readIndex(2), dropMalformed},
		{"read index response without context", msg(pb.MsgReadIndexResp, from, self, 5), dropMalformed},
		{"vote with a transfer context", with(msg(pb.MsgVote, from, self, 1000), func(m *pb.Message) {
			m.Context = []byte("CampaignTransfer")
		}), dropMalformed},
		{"pre-vote with a context", with(msg(pb.MsgPreVote, from, self, 6), func(m *pb.Message) { m.Context = []byte("x") }), dropMalformed},
		{"rejection hint above index", with(msg(pb.MsgAppResp, from, self, 5), func(m *pb.Message) {
			m.Index, m.Reject, m.RejectHint = new(uint64(3)), new(true), new(uint64(4))
		}), dropMalformed},
		{"append: entry out of place", with(appendMsg(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Index = new(uint64(1))
		}), dropMalformed},
		{"append: gap", with(appendMsg(from, self, 5, 3, 2, 5, 5), func(m *pb.Message) {
			m.Entries[1].Index = new(uint64(6))
		}), dropMalformed},
		{"append: term above the message's", appendMsg(from, self, 5, 3, 2, 6), dropMalformed},
		{"append: terms going down", appendMsg(from, self, 5, 3, 2, 4, 3), dropMalformed},
		{"append: term below the previous entry's", appendMsg(from, self, 5, 3, 4, 3), dropMalformed},
		{"append: previous term above the message's", appendMsg(from, self, 5, 3, 6), dropMalformed},
		// raft computes index+1 unchecked: a snapshot at MaxUint64 made a
		// node panic restoring it.
		{"snapshot at the last index", snapMsg(math.MaxUint64, 2), dropMalformed},
		{"snapshot past maxPeerIndex", snapMsg(maxPeerIndex+1, 2), dropMalformed},
		{"snapshot at maxPeerIndex", snapMsg(maxPeerIndex, 2), ""},
		{"append ending past maxPeerIndex", appendMsg(from, self, 5, maxPeerIndex, 2, 5), dropMalformed},
		{"append after the last index", appendMsg(from, self, 5, math.MaxUint64, 2), dropMalformed},
		{"append ending at maxPeerIndex", appendMsg(from, self, 5, maxPeerIndex-1, 2, 5), ""},
		{"heartbeat committing past maxPeerIndex", heartbeat(from, self, 5, maxPeerIndex+1), dropMalformed},
		{"heartbeat at a term past maxPeerTerm", heartbeat(from, self, maxPeerTerm+1, 1), dropMalformed},
		{"heartbeat at the last term", heartbeat(from, self, math.MaxUint64, 1), dropMalformed},
		{"heartbeat at maxPeerTerm", heartbeat(from, self, maxPeerTerm, 1), ""},
		{"append response at the last term", with(msg(pb.MsgAppResp, from, self, math.MaxUint64), func(m *pb.Message) {
			m.Index = new(uint64(0))
		}), dropMalformed},
		{"vote with a log term past maxPeerTerm", with(msg(pb.MsgVote, from, self, 6), func(m *pb.Message) {
			m.LogTerm = new(uint64(maxPeerTerm + 1))
		}), dropMalformed},
		{"vote for a log past maxPeerIndex", with(msg(pb.MsgVote, from, self, 6), func(m *pb.Message) {
			m.Index = new(uint64(math.MaxUint64))
		}), dropMalformed},
		{"append: index wraps", with(appendMsg(from, self, 5, 0, 0, 5), func(m *pb.Message) {
			m.Index = new(uint64(1<<64 - 1))
			m.Entries[0].Index = new(uint64(0))
		}), dropMalformed},
		{"append: conf change v2", with(appendMsg(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Type = pb.EntryConfChangeV2.Enum()
		}), dropMalformed},
		{"append: undecodable conf change", with(appendMsg(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Type, m.Entries[0].Data = pb.EntryConfChange.Enum(), []byte{0xff, 0xff}
		}), dropMalformed},
		{"append: conf change for node 0", with(appendMsg(from, self, 5, 3, 2), func(m *pb.Message) {
			m.Entries = []*pb.Entry{confChangeEntry(4, 5, &pb.ConfChange{Type: pb.ConfChangeRemoveNode.Enum()})}
		}), dropMalformed},
		{"append: unknown entry type", with(appendMsg(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Type = pb.EntryType(7).Enum()
		}), dropMalformed},
		{"snapshot at index 0", with(snapMsg(10, 2), func(m *pb.Message) { m.Snapshot.Metadata.Index = new(uint64(0)) }), dropMalformed},
		{"snapshot of a later term", with(snapMsg(10, 2), func(m *pb.Message) { m.Term = new(uint64(1)) }), dropMalformed},
		{"snapshot without voters", snap(&pb.ConfState{Learners: []uint64{1}}, members), dropMalformed},
		{"snapshot of a joint configuration", snap(&pb.ConfState{Voters: []uint64{1}, VotersOutgoing: []uint64{2}}, members), dropMalformed},
		{"snapshot listing a node twice", snap(&pb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{2}}, members), dropMalformed},
		{"snapshot with voter 0", snap(&pb.ConfState{Voters: []uint64{0, 1}}, members), dropMalformed},
		{"snapshot with an undecodable member list", snap(&pb.ConfState{Voters: []uint64{1}}, []byte{0x05}), dropMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkPeerMessage(tc.m, from, self)
			if got != tc.want || (err != nil) != (tc.want != "") {
				t.Fatalf("checkPeerMessage = %q, %v; want %q", got, err, tc.want)
			}
			if err != nil && !errors.Is(err, errDropped) {
				t.Fatalf("error %v does not wrap errDropped", err)
			}
		})
	}
}

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
		DisableProposalForwarding: true, Logger: raftLogger{testLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	return rn, ms
}

// TestAdmitState is the loop-side filter's table: what a message claims
// about the log, against a log of 3 entries with 1 committed.
func TestAdmitState(t *testing.T) {
	resp := func(index uint64) *pb.Message {
		return with(msg(pb.MsgAppResp, 2, 1, 2), func(m *pb.Message) { m.Index = new(index) })
	}
	cases := []struct {
		name string
		m    *pb.Message
		want dropReason
	}{
		{"heartbeat within the commit index", heartbeat(2, 1, 2, 1), ""},
		{"heartbeat committing the log", heartbeat(2, 1, 2, 3), ""},
		{"heartbeat committing past the log", heartbeat(2, 1, 2, 4), dropBeyondLog},
		{"the reported heartbeat", heartbeat(2, 1, 1000, 1<<40), dropBeyondLog},
		{"append response within the log", resp(3), ""},
		{"append response past the log", resp(4), dropBeyondLog},
		{"other types", appendMsg(2, 1, 2, 3, 2, 2), ""},
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
	mustStep(t, rn, appendMsg(2, 1, 3, 1, 1, 3))
	last, _ := ms.LastIndex() // still 3: nothing was persisted
	hb := heartbeat(2, 1, 3, 3)
	if why, err := admitState(hb, rn, last, 1); err != nil {
		t.Fatalf("heartbeat within the stored log dropped: %s %v", why, err)
	}
	if c := hb.GetCommit(); c > 2 {
		t.Fatalf("heartbeat commit left at %d, past raft's last index 2", c)
	}
	mustStep(t, rn, hb)
}
