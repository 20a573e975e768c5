package peer

import (
	"errors"
	"math"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/store"
)

// TestCheckPeerMessage is the session-side filter's table: every type a
// peer may not send, addressing, and the fields raft takes on faith.
func TestCheckPeerMessage(t *testing.T) {
	const from, self = 2, 1
	readIndex := func(n int) *pb.Message {
		m := peertest.Msg(pb.MsgReadIndex, from, self, 0)
		for range n {
			m.Entries = append(m.Entries, &pb.Entry{Data: []byte("ctx")})
		}
		return m
	}
	snap := func(cs *pb.ConfState, data []byte) *pb.Message {
		m := peertest.Snap(10, 2)
		m.Snapshot.Metadata.ConfState, m.Snapshot.Data = cs, data
		return m
	}
	members := store.EncodeMembers(peertest.Members)
	cases := []struct {
		name string
		m    *pb.Message
		want DropReason // "" passes
	}{
		{"heartbeat", peertest.Heartbeat(from, self, 5, 1<<40), ""}, // its commit is the loop's to check
		{"heartbeat response", peertest.Msg(pb.MsgHeartbeatResp, from, self, 5), ""},
		{"append", peertest.Append(from, self, 5, 3, 2, 2, 5, 5), ""},
		{"empty append", peertest.Append(from, self, 5, 3, 2), ""},
		{"append response", peertest.With(peertest.Msg(pb.MsgAppResp, from, self, 5), func(m *pb.Message) { m.Index = new(uint64(9)) }), ""},
		{"append rejection", peertest.With(peertest.Msg(pb.MsgAppResp, from, self, 5), func(m *pb.Message) {
			m.Index, m.Reject, m.RejectHint = new(uint64(9)), new(true), new(uint64(4))
		}), ""},
		{"vote", peertest.Msg(pb.MsgVote, from, self, 6), ""},
		{"vote response", peertest.Msg(pb.MsgVoteResp, from, self, 6), ""},
		{"pre-vote", peertest.Msg(pb.MsgPreVote, from, self, 6), ""},
		{"pre-vote response", peertest.Msg(pb.MsgPreVoteResp, from, self, 6), ""},
		{"read index", readIndex(1), ""},
		{"read index response", peertest.With(peertest.Msg(pb.MsgReadIndexResp, from, self, 5), func(m *pb.Message) {
			m.Entries = []*pb.Entry{{Data: []byte("ctx")}}
		}), ""},
		{"snapshot", peertest.Snap(10, 2), ""},
		{"conf change entry", peertest.With(peertest.Append(from, self, 5, 3, 2), func(m *pb.Message) {
			m.Entries = []*pb.Entry{peertest.ConfChangeEntry(4, 5, &pb.ConfChange{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: new(uint64(4))})}
		}), ""},

		// Types a peer may not send.
		{"proposal", peertest.With(peertest.Msg(pb.MsgProp, from, self, 0), func(m *pb.Message) { m.Entries = []*pb.Entry{{Data: []byte("x")}} }), DropType},
		{"leader transfer", peertest.Msg(pb.MsgTransferLeader, from, self, 5), DropType},
		{"timeout now (the raft loop checks its sender)", peertest.Msg(pb.MsgTimeoutNow, from, self, 5), ""},
		{"hup", peertest.Msg(pb.MsgHup, from, self, 0), DropType},
		{"beat", peertest.Msg(pb.MsgBeat, from, self, 0), DropType},
		{"check quorum", peertest.Msg(pb.MsgCheckQuorum, from, self, 0), DropType},
		{"unreachable", peertest.Msg(pb.MsgUnreachable, from, self, 0), DropType},
		{"snapshot status", peertest.Msg(pb.MsgSnapStatus, from, self, 0), DropType},
		{"storage append", peertest.Msg(pb.MsgStorageAppend, from, self, 5), DropType},
		{"storage append response", peertest.Msg(pb.MsgStorageAppendResp, from, self, 5), DropType},
		{"storage apply", peertest.Msg(pb.MsgStorageApply, from, self, 5), DropType},
		{"storage apply response", peertest.Msg(pb.MsgStorageApplyResp, from, self, 5), DropType},
		{"forget leader", peertest.Msg(pb.MsgForgetLeader, from, self, 0), DropType},
		{"unknown type", peertest.Msg(pb.MessageType(99), from, self, 5), DropType},

		// Addressing.
		{"another sender", peertest.Heartbeat(3, self, 5, 1), DropWrongSender},
		{"sender 0", peertest.Heartbeat(0, self, 5, 1), DropWrongSender},
		{"another recipient", peertest.Heartbeat(from, 3, 5, 1), DropWrongTo},

		// Fields.
		{"no term", peertest.Heartbeat(from, self, 0, 1), DropMalformed},
		{"read index with a term", peertest.With(readIndex(1), func(m *pb.Message) { m.Term = new(uint64(1000)) }), DropMalformed},
		{"read index without context", readIndex(0), DropMalformed},
		{"read index with two contexts", readIndex(2), DropMalformed},
		{"read index response without context", peertest.Msg(pb.MsgReadIndexResp, from, self, 5), DropMalformed},
		{"vote with a transfer context (the raft loop checks it)", peertest.With(peertest.Msg(pb.MsgVote, from, self, 1000), func(m *pb.Message) {
			m.Context = []byte("CampaignTransfer")
		}), ""},
		{"vote with another context", peertest.With(peertest.Msg(pb.MsgVote, from, self, 6), func(m *pb.Message) { m.Context = []byte("x") }), DropMalformed},
		{"pre-vote with a transfer context", peertest.With(peertest.Msg(pb.MsgPreVote, from, self, 6), func(m *pb.Message) {
			m.Context = []byte("CampaignTransfer")
		}), DropMalformed},
		{"pre-vote with a context", peertest.With(peertest.Msg(pb.MsgPreVote, from, self, 6), func(m *pb.Message) { m.Context = []byte("x") }), DropMalformed},
		{"rejection hint above index", peertest.With(peertest.Msg(pb.MsgAppResp, from, self, 5), func(m *pb.Message) {
			m.Index, m.Reject, m.RejectHint = new(uint64(3)), new(true), new(uint64(4))
		}), DropMalformed},
		{"append: entry out of place", peertest.With(peertest.Append(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Index = new(uint64(1))
		}), DropMalformed},
		{"append: gap", peertest.With(peertest.Append(from, self, 5, 3, 2, 5, 5), func(m *pb.Message) {
			m.Entries[1].Index = new(uint64(6))
		}), DropMalformed},
		{"append: term above the message's", peertest.Append(from, self, 5, 3, 2, 6), DropMalformed},
		{"append: terms going down", peertest.Append(from, self, 5, 3, 2, 4, 3), DropMalformed},
		{"append: term below the previous entry's", peertest.Append(from, self, 5, 3, 4, 3), DropMalformed},
		{"append: previous term above the message's", peertest.Append(from, self, 5, 3, 6), DropMalformed},
		// raft computes index+1 unchecked: a snapshot at MaxUint64 made a
		// node panic restoring it.
		{"snapshot at the last index", peertest.Snap(math.MaxUint64, 2), DropMalformed},
		{"snapshot past MaxIndex", peertest.Snap(MaxIndex+1, 2), DropMalformed},
		{"snapshot at MaxIndex", peertest.Snap(MaxIndex, 2), ""},
		{"append ending past MaxIndex", peertest.Append(from, self, 5, MaxIndex, 2, 5), DropMalformed},
		{"append after the last index", peertest.Append(from, self, 5, math.MaxUint64, 2), DropMalformed},
		{"append ending at MaxIndex", peertest.Append(from, self, 5, MaxIndex-1, 2, 5), ""},
		{"heartbeat committing past MaxIndex", peertest.Heartbeat(from, self, 5, MaxIndex+1), DropMalformed},
		{"heartbeat at a term past MaxTerm", peertest.Heartbeat(from, self, MaxTerm+1, 1), DropMalformed},
		{"heartbeat at the last term", peertest.Heartbeat(from, self, math.MaxUint64, 1), DropMalformed},
		{"heartbeat at MaxTerm", peertest.Heartbeat(from, self, MaxTerm, 1), ""},
		{"append response at the last term", peertest.With(peertest.Msg(pb.MsgAppResp, from, self, math.MaxUint64), func(m *pb.Message) {
			m.Index = new(uint64(0))
		}), DropMalformed},
		{"vote with a log term past MaxTerm", peertest.With(peertest.Msg(pb.MsgVote, from, self, 6), func(m *pb.Message) {
			m.LogTerm = new(uint64(MaxTerm + 1))
		}), DropMalformed},
		{"vote for a log past MaxIndex", peertest.With(peertest.Msg(pb.MsgVote, from, self, 6), func(m *pb.Message) {
			m.Index = new(uint64(math.MaxUint64))
		}), DropMalformed},
		{"append: index wraps", peertest.With(peertest.Append(from, self, 5, 0, 0, 5), func(m *pb.Message) {
			m.Index = new(uint64(1<<64 - 1))
			m.Entries[0].Index = new(uint64(0))
		}), DropMalformed},
		{"append: conf change v2", peertest.With(peertest.Append(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Type = pb.EntryConfChangeV2.Enum()
		}), DropMalformed},
		{"append: undecodable conf change", peertest.With(peertest.Append(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Type, m.Entries[0].Data = pb.EntryConfChange.Enum(), []byte{0xff, 0xff}
		}), DropMalformed},
		{"append: conf change for node 0", peertest.With(peertest.Append(from, self, 5, 3, 2), func(m *pb.Message) {
			m.Entries = []*pb.Entry{peertest.ConfChangeEntry(4, 5, &pb.ConfChange{Type: pb.ConfChangeRemoveNode.Enum()})}
		}), DropMalformed},
		{"append: unknown entry type", peertest.With(peertest.Append(from, self, 5, 3, 2, 5), func(m *pb.Message) {
			m.Entries[0].Type = pb.EntryType(7).Enum()
		}), DropMalformed},
		{"snapshot at index 0", peertest.With(peertest.Snap(10, 2), func(m *pb.Message) { m.Snapshot.Metadata.Index = new(uint64(0)) }), DropMalformed},
		{"snapshot of a later term", peertest.With(peertest.Snap(10, 2), func(m *pb.Message) { m.Term = new(uint64(1)) }), DropMalformed},
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
