package raft

import (
	"bytes"
	"context"
	"errors"
	"testing"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/raft/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// FuzzPeerFrames feeds arbitrary bytes to every decoder a peer connection
// uses: none may panic, and whatever decodes must re-encode to the same
// bytes.
func FuzzPeerFrames(f *testing.F) {
	id := transferID{index: 7, term: 2, nonce: 99}
	f.Add(appendHello(nil, hello{from: 1, cluster: 2, addr: "127.0.0.1:1"}))
	f.Add(appendSnapshotBegin(nil, id))
	f.Add(appendChunkRecord(appendSnapshotFrameHeader(nil, frameSnapshotChunk, id), []byte("k"), []byte("raw")))
	f.Add(appendChunkRecord(appendSnapshotFrameHeader(nil, frameSnapshotLease, id), []byte("l\x00\x00\x00\x00\x00\x00\x00\x07"), make([]byte, 16)))
	if b, err := appendSnapshotEnd(nil, id, &pb.Message{Type: pb.MsgSnap.Enum()}); err == nil {
		f.Add(b)
	}
	f.Add([]byte{frameMessage, 0x08, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := parseHello(b); err == nil {
			if out := appendHello(nil, h); !bytes.Equal(out, b) {
				t.Fatalf("hello re-encodes differently")
			}
		}
		if len(b) == 0 {
			return
		}
		if id, body, err := parseSnapshotFrame(b); err == nil {
			if out := append(appendSnapshotFrameHeader(nil, b[0], id), body...); !bytes.Equal(out, b) {
				t.Fatalf("snapshot frame re-encodes differently")
			}
			total := 0
			if forEachChunkRecord(body, func(k, raw []byte) error {
				total += len(k) + len(raw)
				return nil
			}) == nil && total > len(body) {
				t.Fatalf("chunk records claim %d bytes of a %d-byte body", total, len(body))
			}
		}
		_, _ = parseSnapshotBegin(b)
		m := &pb.Message{}
		_ = proto.Unmarshal(b[1:], m)
	})
}

// fuzzNode is a node with a real store and metrics, enough for admitHello
// and a peerReader: node 1 of 1, 2, 3, whose cluster id is cluster (0: a
// joining node that has not learned it).
func fuzzNode(tb testing.TB, st *store.Store, cluster uint64) *Node {
	tb.Helper()
	m, err := newMetrics(nil)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := testConfig().withDefaults()
	cfg.ID, cfg.InitialCluster = 1, map[uint64]string{1: "a", 2: "b", 3: "c"}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	n := &Node{
		cfg: cfg, id: 1, log: cfg.Logger, store: st, metrics: m, ctx: ctx, cancel: cancel,
		recvc: make(chan inbound, 16), reportc: make(chan report, 16), stopc: make(chan struct{}),
		addrs: map[uint64]string{1: "a", 2: "b", 3: "c"}, conns: map[transport.Conn]struct{}{},
	}
	n.peers = newPeerSet(n)
	n.peers.ident.id.Store(cluster)
	return n
}

func fuzzStore(f testing.TB) *store.Store {
	st, err := store.Open(f.TempDir(), store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	return st
}

// FuzzPeerHello feeds arbitrary hellos to the session check of a node of
// cluster 42 and of a joining node: it must not panic, and a session it
// admits must come from another node and carry the node's (possibly just
// learned) cluster id; a joining node learns only from its members.
func FuzzPeerHello(f *testing.F) {
	f.Add(appendHello(nil, hello{from: 2, cluster: 42, addr: "b"}), false)
	f.Add(appendHello(nil, hello{from: 2, addr: "b"}), false)
	f.Add(appendHello(nil, hello{from: 1, cluster: 42}), false)
	f.Add(appendHello(nil, hello{from: 99, cluster: 42}), true)
	f.Add(appendHello(nil, hello{from: 3, cluster: 7}), true)
	f.Add(append(appendHello(nil, hello{from: 2, cluster: 42}), bytes.Repeat([]byte("x"), 300)...), false)
	st := fuzzStore(f)
	f.Fuzz(func(t *testing.T, b []byte, joining bool) {
		cluster := uint64(42)
		if joining {
			cluster = 0
		}
		n := fuzzNode(t, st, cluster)
		h, why, err := n.admitHello(b)
		if err != nil {
			if why == "" || !errors.Is(err, ErrPeerRefused) {
				t.Fatalf("refused with reason %q and error %v", why, err)
			}
			return
		}
		if ours := n.ClusterID(); h.cluster != ours || ours == 0 || h.from == n.id || h.from == 0 {
			t.Fatalf("admitted hello from %d of cluster %x; node %d of cluster %x", h.from, h.cluster, n.id, ours)
		}
		if joining && !n.isMember(h.from) {
			t.Fatalf("joining node learned its cluster from non-member %d", h.from)
		}
	})
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
			if err := rn.Step(msg(typ, 2, 1, 3)); err != nil {
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
// whole receive path: decoding and the session-side filter (peerReader),
// then for what gets through the loop-side filter (admitState) and raft
// itself, a follower or a leader, both frames stepped before the Ready as
// the loop may. Nothing may panic: not the decoders, not the filter, and
// not raft on anything the filter lets through.
func FuzzPeerMessage(f *testing.F) {
	frame := func(m *pb.Message) []byte {
		b, err := appendMessageFrame(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	snapFrames := func(cs *pb.ConfState) ([]byte, []byte) {
		m := snapMsg(10, 2)
		m.Snapshot.Metadata.ConfState = cs
		id := transferID{index: 10, term: 2, nonce: 1}
		end, err := appendSnapshotEnd(nil, id, m)
		if err != nil {
			f.Fatal(err)
		}
		return appendSnapshotBegin(nil, id), end
	}
	resp := with(msg(pb.MsgAppResp, 2, 1, 3), func(m *pb.Message) { m.Index = new(uint64(1 << 40)) })
	for _, leader := range []bool{false, true} {
		f.Add(frame(heartbeat(2, 1, 1000, 1<<40)), []byte{}, leader) // the reported crash
		f.Add(frame(heartbeat(2, 1, 2, 1<<40)), []byte{}, leader)
		f.Add(frame(with(appendMsg(2, 1, 3, 1, 1, 3), func(m *pb.Message) { m.Entries[0].Index = new(uint64(1)) })), []byte{}, leader)
		f.Add(frame(appendMsg(2, 1, 3, 1, 1, 3)), frame(heartbeat(2, 1, 3, 3)), leader) // truncate, then commit the old tail
		f.Add(frame(resp), []byte{}, leader)
		f.Add(frame(with(msg(pb.MsgVote, 2, 1, 1000), func(m *pb.Message) { m.Context = []byte("CampaignTransfer") })), []byte{}, leader)
		f.Add(frame(msg(pb.MsgTimeoutNow, 2, 1, 2)), []byte{}, leader)
		f.Add(frame(msg(pb.MsgReadIndex, 2, 1, 0)), []byte{}, leader)
		f.Add(frame(with(msg(pb.MsgProp, 2, 1, 0), func(m *pb.Message) { m.Entries = []*pb.Entry{{}} })), []byte{}, leader)
		f.Add(frame(msg(pb.MsgProp, 2, 1, 3)), []byte{}, leader) // raft panics on an empty proposal
		b, s := snapFrames(&pb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{2}})
		f.Add(b, s, leader)
		b, s = snapFrames(&pb.ConfState{Voters: []uint64{1, 2, 3}})
		f.Add(b, s, leader)
	}
	st := fuzzStore(f)
	f.Fuzz(func(t *testing.T, frame1, frame2 []byte, leader bool) {
		n := fuzzNode(t, st, 42)
		r := &peerReader{n: n, from: 2}
		defer r.discard()
		fr := newFuzzRaft(t, leader)
		last, _ := fr.ms.LastIndex()
		for _, fb := range [][]byte{frame1, frame2} {
			if err := r.handle(fb); err != nil {
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
