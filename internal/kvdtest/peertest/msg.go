package peertest

import (
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/store"
)

// Msg builds a message of type t from node from to node to at term.
func Msg(t pb.MessageType, from, to, term uint64) *pb.Message {
	return &pb.Message{Type: t.Enum(), From: new(from), To: new(to), Term: new(term)}
}

// Heartbeat is from's heartbeat to to at term, committing commit.
func Heartbeat(from, to, term, commit uint64) *pb.Message {
	m := Msg(pb.MsgHeartbeat, from, to, term)
	m.Commit = new(commit)
	return m
}

// Append is an append after (index, logTerm) of entries at the terms
// given, numbered from index+1.
func Append(from, to, term, index, logTerm uint64, terms ...uint64) *pb.Message {
	m := Msg(pb.MsgApp, from, to, term)
	m.Index, m.LogTerm = new(index), new(logTerm)
	for i, et := range terms {
		m.Entries = append(m.Entries, &pb.Entry{Index: new(index + 1 + uint64(i)), Term: new(et)})
	}
	return m
}

// ConfChangeEntry is the log entry at index/term carrying cc.
func ConfChangeEntry(index, term uint64, cc *pb.ConfChange) *pb.Entry {
	data, err := proto.Marshal(cc)
	if err != nil {
		panic(err)
	}
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryConfChange.Enum(), Data: data}
}

// With returns m after f changed it.
func With(m *pb.Message, f func(m *pb.Message)) *pb.Message {
	f(m)
	return m
}

// Members is the membership of Snap's snapshots: nodes 1, 2 and 3.
var Members = []store.Member{{ID: 1, Addr: "a"}, {ID: 2, Addr: "b"}, {ID: 3, Addr: "c"}}

// Snap is node 2's MsgSnap to node 1 for the snapshot at index/term.
func Snap(index, term uint64) *pb.Message {
	return &pb.Message{
		Type: pb.MsgSnap.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(term),
		Snapshot: &pb.Snapshot{
			Data: store.EncodeMembers(Members),
			Metadata: &pb.SnapshotMetadata{
				ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}},
				Index:     new(index),
				Term:      new(term),
			},
		},
	}
}
