package wal

import (
	"fmt"
	"io"
	"log"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// raftStorage serves raft.Storage from a Log, as the raft loop will: the
// snapshot is only the truncation point and a fixed ConfState.
type raftStorage struct {
	l  *Log
	cs *pb.ConfState
}

func (s raftStorage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return s.l.HardState(), s.cs, nil
}
func (s raftStorage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	return s.l.Entries(lo, hi, maxSize)
}
func (s raftStorage) Term(i uint64) (uint64, error) { return s.l.Term(i) }
func (s raftStorage) LastIndex() (uint64, error)    { return s.l.LastIndex(), nil }
func (s raftStorage) FirstIndex() (uint64, error)   { return s.l.FirstIndex(), nil }
func (s raftStorage) Snapshot() (*pb.Snapshot, error) {
	i := s.l.FirstIndex() - 1
	t, err := s.l.Term(i)
	return &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(i), Term: proto.Uint64(t), ConfState: s.cs}}, err
}

// raftNode is a one-member raft group persisting through a Log.
type raftNode struct {
	t       *testing.T
	l       *Log
	rn      *etcdraft.RawNode
	applied []string
	index   uint64
}

func startRaft(t *testing.T, l *Log, applied uint64, bootstrap bool) *raftNode {
	t.Helper()
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{
		ID: 1, ElectionTick: 10, HeartbeatTick: 1, MaxInflightMsgs: 256, MaxSizePerMsg: 1 << 20,
		Storage: raftStorage{l: l, cs: &pb.ConfState{Voters: []uint64{1}}}, Applied: applied,
		Logger: &etcdraft.DefaultLogger{Logger: log.New(io.Discard, "", 0)},
	})
	must(t, err)
	if bootstrap {
		must(t, rn.Bootstrap([]etcdraft.Peer{{ID: 1}}))
	}
	n := &raftNode{t: t, l: l, rn: rn, index: applied}
	n.drain()
	must(t, rn.Campaign())
	n.drain()
	return n
}

// drain handles Readies as the raft loop does: entries and HardState to
// the log, one Sync when raft asks for one, then apply.
func (n *raftNode) drain() {
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		must(n.t, n.l.Append(rd.Entries))
		must(n.t, n.l.SetHardState(rd.HardState))
		if rd.MustSync {
			must(n.t, n.l.Sync())
		}
		for _, e := range rd.CommittedEntries {
			if e.GetType() == pb.EntryType_EntryNormal && len(e.GetData()) > 0 {
				n.applied = append(n.applied, fmt.Sprintf("%d=%s", e.GetIndex(), e.GetData()))
			}
			n.index = e.GetIndex()
		}
		n.rn.Advance(rd)
	}
}

// TestRaftRestartsFromTheLog runs a raft group on the log, compacts it
// behind what was applied, restarts from the log alone and checks that
// raft hands back exactly the committed entries after the applied index.
func TestRaftRestartsFromTheLog(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs, MinSegmentSize)
	l, _ := mustOpen(t, cfg)
	n := startRaft(t, l, 0, true)
	for i := range 200 {
		must(t, n.rn.Propose([]byte(fmt.Sprint("v", i))))
		n.drain()
	}
	if len(n.applied) != 200 {
		t.Fatalf("applied %d proposals, want 200", len(n.applied))
	}
	// The state machine persisted up to keep; the log keeps what follows.
	keep := n.index - 50
	must(t, l.Compact(keep))
	var want []string
	for _, a := range n.applied {
		var idx uint64
		if _, err := fmt.Sscanf(a, "%d=", &idx); err == nil && idx > keep {
			want = append(want, a)
		}
	}
	if len(want) != 50 {
		t.Fatalf("%d proposals after the compaction point, want 50", len(want))
	}
	must(t, l.Close())

	l, r := mustOpen(t, cfg)
	defer l.Close()
	if r.HardState.GetCommit() < n.index {
		t.Fatalf("replayed commit %d, want at least %d", r.HardState.GetCommit(), n.index)
	}
	n2 := startRaft(t, l, keep, false)
	if fmt.Sprint(n2.applied) != fmt.Sprint(want) {
		t.Fatalf("after restart raft applied %v, want %v", n2.applied, want)
	}
	must(t, n2.rn.Propose([]byte("after")))
	n2.drain()
	if got := n2.applied[len(n2.applied)-1]; !strings.HasSuffix(got, "=after") {
		t.Fatalf("a proposal after the restart applied %q", got)
	}
}
