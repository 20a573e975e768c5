package peer

import (
	"errors"
	"math"
	"testing"

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
		want DropReason // "" passes
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
		{"proposal", with(msg(pb.MsgProp, from, self, 0), func(m *pb.Message) { m.Entries = []*pb.Entry{{Data: []byte("x")}} }), DropType},
		{"leader transfer", msg(pb.MsgTransferLeader, from, self, 5), DropType},
		{"timeout now", msg(pb.MsgTimeoutNow, from, self, 5), DropType},
		{"hup", msg(pb.MsgHup, from, self, 0), DropType},
		{"beat", msg(pb.MsgBeat, from, self, 0), DropType},
		{"check quorum", msg(pb.MsgCheckQuorum, from, self, 0), DropType},
		{"unreachable", msg(pb.MsgUnreachable, from, self, 0), DropType},
		{"snapshot status", msg(pb.MsgSnapStatus, from, self, 0), DropType},
		{"storage append", msg(pb.MsgStorageAppend, from, self, 5), DropType},
		{"storage append response", msg(pb.MsgStorageAppendResp, from, self, 5), DropType},
		{"storage apply", msg(pb.MsgStorageApply, from, self, 5), DropType},
		{"storage apply response", msg(pb.MsgStorageApplyResp, from, self, 5), DropType},
		{"forget leader", msg(pb.MsgForgetLeader, from, self, 0), DropType},
		{"unknown type", msg(pb.MessageType(99), from, self, 5), DropType},

		// Addressing.
		{"another sender", heartbeat(3, self, 5, 1), DropWrongSender},
		{"sender 0", heartbeat(0, self, 5, 1), DropWrongSender},
		{"another recipient", heartbeat(from, 3, 5, 1), DropWrongTo},

		// Fields.
		{"no term", heartbeat(from, self, 0, 1), DropMalformed},
		{"read index with a term", with(readIndex(1), func(m *pb.Message) { m.Term = new(uint64(1000)) }), DropMalformed},
		{"read index without context", readIndex(0), DropMalformed},
		{"read index with two contexts", readIndex(2), DropMalformed},
		{"read index response without context", msg(pb.MsgReadIndexResp, from, self, 5), DropMalformed},
		{"vote with a transfer context", with(msg(pb.MsgVote, from, self, 1000), func(m *pb.Message) {
			m.Context = []byte("CampaignTransfer")
		}), DropMalformed},
		{"pre-vote with a context", with(msg(pb.MsgPreVote, from, self, 6), func(m *pb.Message) { m.Context = []byte("x") }), DropMalformed},
		{"rejection hint above index", with(msg(pb.MsgAppResp, from, self, 5), func(m *pb.Message) {
			m.Index, m.Reject, m.RejectHint = new(uint64(3)), new(true), new(uint64(4))
		}), DropMalformed},
		{"append: entry out of place", with(appendMsg(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Index = new(uint64(1))
		}), DropMalformed},
		{"append: gap", with(appendMsg(from, self, 5, 3, 2, 5, 5), func(m *pb.Message) {
			m.Entries[1].Index = new(uint64(6))
		}), DropMalformed},
		{"append: term above the message's", appendMsg(from, self, 5, 3, 2, 6), DropMalformed},
		{"append: terms going down", appendMsg(from, self, 5, 3, 2, 4, 3), DropMalformed},
		{"append: term below the previous entry's", appendMsg(from, self, 5, 3, 4, 3), DropMalformed},
		{"append: previous term above the message's", appendMsg(from, self, 5, 3, 6), DropMalformed},
		// raft computes index+1 unchecked: a snapshot at MaxUint64 made a
		// node panic restoring it.
		{"snapshot at the last index", snapMsg(math.MaxUint64, 2), DropMalformed},
		{"snapshot past MaxIndex", snapMsg(MaxIndex+1, 2), DropMalformed},
		{"snapshot at MaxIndex", snapMsg(MaxIndex, 2), ""},
		{"append ending past MaxIndex", appendMsg(from, self, 5, MaxIndex, 2, 5), DropMalformed},
		{"append after the last index", appendMsg(from, self, 5, math.MaxUint64, 2), DropMalformed},
		{"append ending at MaxIndex", appendMsg(from, self, 5, MaxIndex-1, 2, 5), ""},
		{"heartbeat committing past MaxIndex", heartbeat(from, self, 5, MaxIndex+1), DropMalformed},
		{"heartbeat at a term past MaxTerm", heartbeat(from, self, MaxTerm+1, 1), DropMalformed},
		{"heartbeat at the last term", heartbeat(from, self, math.MaxUint64, 1), DropMalformed},
		{"heartbeat at MaxTerm", heartbeat(from, self, MaxTerm, 1), ""},
		{"append response at the last term", with(msg(pb.MsgAppResp, from, self, math.MaxUint64), func(m *pb.Message) {
			m.Index = new(uint64(0))
		}), DropMalformed},
		{"vote with a log term past MaxTerm", with(msg(pb.MsgVote, from, self, 6), func(m *pb.Message) {
			m.LogTerm = new(uint64(MaxTerm + 1))
		}), DropMalformed},
		{"vote for a log past MaxIndex", with(msg(pb.MsgVote, from, self, 6), func(m *pb.Message) {
			m.Index = new(uint64(math.MaxUint64))
		}), DropMalformed},
		{"append: index wraps", with(appendMsg(from, self, 5, 0, 0, 5), func(m *pb.Message) {
			m.Index = new(uint64(1<<64 - 1))
			m.Entries[0].Index = new(uint64(0))
		}), DropMalformed},
		{"append: conf change v2", with(appendMsg(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Type = pb.EntryConfChangeV2.Enum()
		}), DropMalformed},
		{"append: undecodable conf change", with(appendMsg(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Type, m.Entries[0].Data = pb.EntryConfChange.Enum(), []byte{0xff, 0xff}
		}), DropMalformed},
		{"append: conf change for node 0", with(appendMsg(from, self, 5, 3, 2), func(m *pb.Message) {
			m.Entries = []*pb.Entry{confChangeEntry(4, 5, &pb.ConfChange{Type: pb.ConfChangeRemoveNode.Enum()})}
		}), DropMalformed},
		{"append: unknown entry type", with(appendMsg(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Type = pb.EntryType(7).Enum()
		}), DropMalformed},
		{"snapshot at index 0", with(snapMsg(10, 2), func(m *pb.Message) { m.Snapshot.Metadata.Index = new(uint64(0)) }), DropMalformed},
		{"snapshot of a later term", with(snapMsg(10, 2), func(m *pb.Message) { m.Term = new(uint64(1)) }), DropMalformed},
		{"snapshot without voters", snap(&pb.ConfState{Learners: []uint64{1}}, members), DropMalformed},
		{"snapshot of a joint configuration", snap(&pb.ConfState{Voters: []uint64{1}, VotersOutgoing: []uint64{2}}, members), DropMalformed},
		{"snapshot listing a node twice", snap(&pb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{2}}, members), DropMalformed},
		{"snapshot with voter 0", snap(&pb.ConfState{Voters: []uint64{0, 1}}, members), DropMalformed},
		{"snapshot with an undecodable member list", snap(&pb.ConfState{Voters: []uint64{1}}, []byte{0x05}), DropMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkPeerMessage(tc.m, from, self)
			if got != tc.want || (err != nil) != (tc.want != "") {
				t.Fatalf("checkPeerMessage = %q, %v; want %q", got, err, tc.want)
			}
			if err != nil && !errors.Is(err, ErrDropped) {
				t.Fatalf("error %v does not wrap ErrDropped", err)
			}
		})
	}
}
