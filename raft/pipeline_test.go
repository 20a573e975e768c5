package raft

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func ents(lo, hi uint64) []*pb.Entry {
	var es []*pb.Entry
	for i := lo; i <= hi; i++ {
		es = append(es, &pb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(2)})
	}
	return es
}

// TestApplyEarly pins which Readies may report their applied writes
// before their fsync: only those whose committed entries were durable
// before the Ready (pipelining, see handleReady).
func TestApplyEarly(t *testing.T) {
	snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(9), Term: proto.Uint64(2)}}
	tests := []struct {
		name      string
		durable   uint64
		entries   []*pb.Entry
		committed []*pb.Entry
		snap      *pb.Snapshot
		want      bool
	}{
		{"committed durable, new entries after", 10, ents(11, 12), ents(8, 10), nil, true},
		{"committed durable, no new entries", 10, nil, ents(9, 10), nil, true},
		{"nothing committed", 10, ents(11, 11), nil, nil, false},
		{"a committed entry appended in this Ready", 10, ents(11, 12), ents(10, 11), nil, false},
		{"committed past the durable end", 10, nil, ents(10, 11), nil, false},
		{"committed entry rewritten by this Ready (conflicting suffix)", 10, ents(9, 10), ents(8, 9), nil, false},
		{"a snapshot in the Ready", 10, nil, ents(9, 10), snap, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &loop{durable: tt.durable}
			rd := etcdraft.Ready{Entries: tt.entries, CommittedEntries: tt.committed, Snapshot: tt.snap}
			if got := l.applyEarly(rd); got != tt.want {
				t.Fatalf("applyEarly = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSendEarly pins whose messages may go out before the fsync: a
// leader's, when the Ready changes neither its term nor its vote.
func TestSendEarly(t *testing.T) {
	msgs := []*pb.Message{{Type: pb.MessageType_MsgApp.Enum(), To: proto.Uint64(2)}}
	snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(9), Term: proto.Uint64(2)}}
	tests := []struct {
		name       string
		leader     bool
		term, vote uint64 // after the Ready's HardState
		msgs       []*pb.Message
		snap       *pb.Snapshot
		want       bool
	}{
		{"leader, same term and vote", true, 5, 1, msgs, nil, true},
		{"leader, no messages", true, 5, 1, nil, nil, false},
		{"leader, term changed", true, 6, 1, msgs, nil, false},
		{"leader, vote changed", true, 5, 2, msgs, nil, false},
		{"leader installing a snapshot", true, 5, 1, msgs, snap, false},
		{"follower", false, 5, 1, msgs, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &loop{isLeader: tt.leader, term: tt.term, vote: tt.vote}
			rd := etcdraft.Ready{Messages: tt.msgs, Snapshot: tt.snap}
			if got := l.sendEarly(rd, 5, 1); got != tt.want {
				t.Fatalf("sendEarly = %v, want %v", got, tt.want)
			}
		})
	}
}

// walGate blocks the log fsyncs (isLogSync) of the data directories below under until
// it is given a token for each.
type walGate struct {
	inj    injector
	under  atomic.Pointer[[]string]
	tokens chan struct{}
}

func newWALGate() *walGate {
	g := &walGate{tokens: make(chan struct{}, 8)}
	g.inj.set(func(op errorfs.Op) error {
		if !isLogSync(op) {
			return nil
		}
		if u := g.under.Load(); u != nil && slices.ContainsFunc(*u, func(dir string) bool { return strings.HasPrefix(op.Path, dir) }) {
			<-g.tokens
		}
		return nil
	})
	return g
}

func (g *walGate) close(under ...string) { g.under.Store(&under) }

// open lets the blocked fsync (and every later one) through.
func (g *walGate) open() {
	g.under.Store(nil)
	for range cap(g.tokens) {
		select {
		case g.tokens <- struct{}{}:
		default:
		}
	}
}

func lastIndex(t *testing.T, tn *testNode) uint64 {
	i, err := tn.node.store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// holds reports whether tn's log holds the entry at index i of the given
// term (durably: the store publishes an append after committing it).
func holds(tn *testNode, i, term uint64) bool {
	got, err := tn.node.store.Term(i)
	return err == nil && got == term
}

func putAsync(n *Node, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := n.Put(context.Background(), []byte(key), []byte("v"))
		done <- err
	}()
	return done
}

func finished(done <-chan error) bool {
	select {
	case err := <-done:
		return err == nil
	default:
		return false
	}
}

// heldWrite starts a 3-node cluster, holds the leader's WAL fsyncs and
// proposes a write of key there; it returns once both followers hold its
// entry (in the leader's term), with the write's outcome channel.
func heldWrite(t *testing.T, key string) (*walGate, *testNode, <-chan error) {
	g := newWALGate()
	c := newCluster(t, 3, Config{FS: errorfs.Wrap(vfs.Default, &g.inj)})
	c.put("warm", "up")
	ld := c.leader()
	idx, term := lastIndex(t, ld), ld.node.Status().Term
	g.close(ld.dir)
	t.Cleanup(g.open)
	done := putAsync(ld.node, key)
	for _, tn := range c.running() {
		if tn != ld {
			wait.For(t, fmt.Sprintf("node %d to hold the entry while the leader's fsync is held", tn.id),
				func() bool { return holds(tn, idx+1, term) })
		}
	}
	return g, ld, done
}

// TestLeaderReplicatesDuringItsFsync: the leader's MsgApp leaves before
// its own WAL fsync (the followers make the entry durable while the
// leader's fsync is held), and the write is not committed until that fsync
// is done, though a quorum of followers holds it.
func TestLeaderReplicatesDuringItsFsync(t *testing.T) {
	g, _, done := heldWrite(t, "k")
	time.Sleep(50 * time.Millisecond) // the followers' acknowledgements reach the leader
	if finished(done) {
		t.Fatal("the write completed before the leader's own fsync")
	}
	g.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAppliedWritesAnsweredDuringTheNextFsync: a write whose entry was
// durable before the Ready that commits it is answered while that Ready's
// fsync (of a newer entry) is still running, and the newer write waits
// for it.
func TestAppliedWritesAnsweredDuringTheNextFsync(t *testing.T) {
	g, ld, first := heldWrite(t, "first")
	second := putAsync(ld.node, "second")
	// The acknowledgements of the first entry and the second proposal
	// queue behind the held fsync; once it is let through, the loop takes
	// them into one Ready: the first entry committed, the second appended.
	time.Sleep(50 * time.Millisecond)
	g.tokens <- struct{}{}
	wait.For(t, "the first write to be answered while the second entry's fsync is held", func() bool {
		select {
		case err := <-first:
			if err != nil {
				t.Fatal(err)
			}
			return true
		default:
			return false
		}
	})
	if finished(second) {
		t.Fatal("the second write completed before the leader's fsync of its entry")
	}
	g.open()
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}
