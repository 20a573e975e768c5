package raft

import (
	"context"
	"testing"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft/peer"
)

// fuzzNode is a node with a real store, metrics and peer layer, enough for
// a peer session's reader: node 1 of 1, 2, 3, whose cluster id is cluster
// (0: a joining node that has not learned it).
func fuzzNode(tb testing.TB, st *store.Store, cluster uint64) *Node {
	tb.Helper()
	m, err := newMetrics(nil)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := testConfig().withDefaults()
	cfg.ID, cfg.InitialCluster, cfg.Transport = 1, map[uint64]string{1: "a", 2: "b", 3: "c"}, newMemNet().endpoint("a")
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	n := &Node{
		cfg: cfg, id: 1, log: cfg.Logger, store: st, metrics: m, ctx: ctx, cancel: cancel,
		recvc: make(chan inbound, 16), reportc: make(chan report, 16), stopc: make(chan struct{}),
		addrs: map[uint64]string{1: "a", 2: "b", 3: "c"},
	}
	ps, err := newPeers(n, cluster)
	if err != nil {
		tb.Fatal(err)
	}
	n.peers = ps
	return n
}

func fuzzStore(f testing.TB) *store.Store {
	st, err := store.Open(f.TempDir(), testStoreOptions())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	return st
}

// fuzzRaft is the raft side of FuzzPeerMessage: a follower whose log is
// 1..3 with 1 committed (logRaft), or that follower made leader of term 3.
type fuzzRaft struct {
	rn     *etcdraft.RawNode
	ms     *etcdraft.MemoryStorage
	commit uint64 // as of the last Ready, like loop.commit
}

func newFuzzRaft(t *testing.T, leader bool) *fuzzRaft {
	rn, ms := logRaft(t)
	fr := &fuzzRaft{rn: rn, ms: ms, commit: 1}
	if leader {
		if err := rn.Campaign(); err != nil {
			t.Fatal(err)
		}
		fr.ready(t)
		for _, typ := range []pb.MessageType{pb.MsgPreVoteResp, pb.MsgVoteResp} {
			if err := rn.Step(peertest.Msg(typ, 2, 1, 3)); err != nil {
				t.Fatal(err)
			}
			fr.ready(t)
		}
		if rn.BasicStatus().RaftState != etcdraft.StateLeader {
			t.Fatal("fuzz harness: not the leader")
		}
	}
	return fr
}

// ready persists whatever raft asks to, as the loop does (without applying
// committed entries).
func (fr *fuzzRaft) ready(t *testing.T) {
	for fr.rn.HasReady() {
		rd := fr.rn.Ready()
		if !etcdraft.IsEmptySnap(rd.Snapshot) {
			if err := fr.ms.ApplySnapshot(rd.Snapshot); err != nil {
				t.Fatalf("apply snapshot: %v", err)
			}
		}
		if err := fr.ms.Append(rd.Entries); err != nil {
			t.Fatalf("append: %v", err)
		}
		if rd.HardState != nil {
			if err := fr.ms.SetHardState(rd.HardState); err != nil {
				t.Fatal(err)
			}
			fr.commit = rd.HardState.GetCommit()
		}
		fr.rn.Advance(rd)
	}
}

// FuzzPeerMessage feeds two arbitrary frames, as one peer session's, to the
// whole receive path: decoding and the session-side filter (peer.Reader),
// then for what gets through the loop-side filter (admitState) and raft
// itself, a follower or a leader, both frames stepped before the Ready as
// the loop may. Nothing may panic: not the decoders, not the filter, and
// not raft on anything the filter lets through.
func FuzzPeerMessage(f *testing.F) {
	frame := func(m *pb.Message) []byte {
		b, err := peer.AppendMessage(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	snapFrames := func(cs *pb.ConfState) ([]byte, []byte) {
		m := peertest.Snap(10, 2)
		m.Snapshot.Metadata.ConfState = cs
		id := peer.TransferID{Index: 10, Term: 2, Nonce: 1}
		end, err := peer.AppendSnapshotEnd(nil, id, m)
		if err != nil {
			f.Fatal(err)
		}
		return peer.AppendSnapshotBegin(nil, id), end
	}
	resp := peertest.With(peertest.Msg(pb.MsgAppResp, 2, 1, 3), func(m *pb.Message) { m.Index = new(uint64(1 << 40)) })
	for _, leader := range []bool{false, true} {
		f.Add(frame(peertest.Heartbeat(2, 1, 1000, 1<<40)), []byte{}, leader) // the reported crash
		f.Add(frame(peertest.Heartbeat(2, 1, 2, 1<<40)), []byte{}, leader)
		f.Add(frame(peertest.With(peertest.Append(2, 1, 3, 1, 1, 3), func(m *pb.Message) { m.Entries[0].Index = new(uint64(1)) })), []byte{}, leader)
		f.Add(frame(peertest.Append(2, 1, 3, 1, 1, 3)), frame(peertest.Heartbeat(2, 1, 3, 3)), leader) // truncate, then commit the old tail
		f.Add(frame(resp), []byte{}, leader)
		f.Add(frame(peertest.With(peertest.Msg(pb.MsgVote, 2, 1, 1000), func(m *pb.Message) { m.Context = []byte("CampaignTransfer") })), []byte{}, leader)
		f.Add(frame(peertest.Msg(pb.MsgTimeoutNow, 2, 1, 2)), []byte{}, leader)
		f.Add(frame(peertest.Msg(pb.MsgReadIndex, 2, 1, 0)), []byte{}, leader)
		f.Add(frame(peertest.With(peertest.Msg(pb.MsgProp, 2, 1, 0), func(m *pb.Message) { m.Entries = []*pb.Entry{{}} })), []byte{}, leader)
		f.Add(frame(peertest.Msg(pb.MsgProp, 2, 1, 3)), []byte{}, leader) // raft panics on an empty proposal
		b, s := snapFrames(&pb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{2}})
		f.Add(b, s, leader)
		b, s = snapFrames(&pb.ConfState{Voters: []uint64{1, 2, 3}})
		f.Add(b, s, leader)
	}
	st := fuzzStore(f)
	f.Fuzz(func(t *testing.T, frame1, frame2 []byte, leader bool) {
		n := fuzzNode(t, st, 42)
		r := reader(t, n, 2)
		fr := newFuzzRaft(t, leader)
		last, _ := fr.ms.LastIndex()
		for _, fb := range [][]byte{frame1, frame2} {
			if err := r.Handle(fb); err != nil {
				return // the session would be dropped
			}
			for len(n.recvc) > 0 {
				in := <-n.recvc
				if in.staged != nil {
					in.staged.Discard()
				}
				if why, err := admitState(in.msg, fr.rn, last, fr.commit); err != nil {
					if why == "" {
						t.Fatalf("dropped without a reason: %v", err)
					}
					continue
				}
				mustStep(t, fr.rn, in.msg)
			}
		}
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("raft panicked handling the Ready: %v", p)
			}
		}()
		fr.ready(t)
	})
}
