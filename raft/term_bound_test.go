package raft

import (
	"errors"
	"math"
	"testing"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft/peer"
)

// stepThroughFilters passes m as peer 2's frame through the session's
// filter (peer.Reader) and the loop's (admitState) into fr's raft, as a
// node does; it reports whether raft was given it.
func stepThroughFilters(t *testing.T, n *Node, fr *fuzzRaft, m *pb.Message) bool {
	t.Helper()
	r := reader(t, n, 2)
	f, err := peer.AppendMessage(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Handle(f); err != nil {
		return false
	}
	stepped := false
	for len(n.recvc) > 0 {
		in := <-n.recvc
		last, _ := fr.ms.LastIndex()
		if _, err := admitState(in.msg, fr.rn, last, fr.commit); err != nil {
			continue
		}
		mustStep(t, fr.rn, in.msg)
		stepped = true
	}
	return stepped
}

// TestForgedTermNeverCrashes: one heartbeat from a member's session at
// term 2^64-1, were it let through, would have raft adopt the term and, at
// its next election, compute the pre-vote's term as term+1 = 0 and panic
// (and the term is stored, so again after every restart). Such a term is
// dropped, and at the largest term admitted a node still campaigns.
func TestForgedTermNeverCrashes(t *testing.T) {
	for _, tc := range []struct {
		term     uint64
		admitted bool
	}{{math.MaxUint64, false}, {maxPeerTerm + 1, false}, {maxPeerTerm, true}} {
		n := fuzzNode(t, fuzzStore(t), 42)
		fr := newFuzzRaft(t, false)
		if got := stepThroughFilters(t, n, fr, peertest.Heartbeat(2, 1, tc.term, 1)); got != tc.admitted {
			t.Fatalf("heartbeat at term %d admitted: %t, want %t", tc.term, got, tc.admitted)
		}
		fr.ready(t)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("after a heartbeat at term %d raft panicked at the next election: %v", tc.term, p)
				}
			}()
			for range 30 { // the leader goes silent: an election timeout and more
				fr.rn.Tick()
				fr.ready(t)
			}
		}()
		if st := fr.rn.BasicStatus().RaftState; st != etcdraft.StatePreCandidate && st != etcdraft.StateCandidate {
			t.Fatalf("after a heartbeat at term %d and silence: %v, want campaigning", tc.term, st)
		}
	}
}

// TestStoredTermOutOfRangeRefusedAtOpen: a data directory whose hard state
// holds a term beyond maxPeerTerm (written by a build that adopted a
// forged heartbeat's term) would panic at the node's next election, after
// every restart: Open refuses it with ErrTermOverflow, naming the term. The
// largest term a peer may name still opens.
func TestStoredTermOutOfRangeRefusedAtOpen(t *testing.T) {
	for _, tc := range []struct {
		term uint64
		open bool
	}{{math.MaxUint64, false}, {maxPeerTerm + 1, false}, {maxPeerTerm, true}} {
		cfg := testConfig()
		cfg.ID, cfg.DataDir = 1, t.TempDir()
		cfg.InitialCluster = map[uint64]string{1: "a"}
		cfg.Transport = newMemNet().endpoint("a")
		n, err := Open(withKV(cfg, nil))
		if err != nil {
			t.Fatal(err)
		}
		n.Close()
		setStoredTerm(t, cfg.DataDir, tc.term)
		cfg.Transport = newMemNet().endpoint("a")
		n, err = Open(withKV(cfg, nil))
		if err == nil {
			n.Close()
		}
		if tc.open != (err == nil) || !tc.open && !errors.Is(err, ErrTermOverflow) {
			t.Fatalf("stored term %d: Open = %v; want it to open: %t", tc.term, err, tc.open)
		}
	}
}

// setStoredTerm rewrites the term of the hard state in dir's store.
func setStoredTerm(t *testing.T, dir string, term uint64) {
	t.Helper()
	st, err := store.Open(dir, testStoreOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hs, _, err := st.InitialState()
	if err != nil {
		t.Fatal(err)
	}
	hs = proto.Clone(hs).(*pb.HardState)
	hs.Term = new(term)
	u := st.NewUpdate()
	defer u.Close()
	if err := u.SetHardState(hs); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(true); err != nil {
		t.Fatal(err)
	}
}
