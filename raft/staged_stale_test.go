package raft

import (
	"maps"
	"testing"
	"time"

	"github.com/kvd-project/kvd/raft/peer"
)

// TestStaleTermSnapshotDataNotInstalled: in one loop iteration node 1
// steps the MsgSnap of the leader of term 5 for snapshot 200/4 (raft takes
// it) and then one for the same snapshot from node 3 at the stale term 4
// (raft ignores it). The data installed is the leader's: staged data
// picked by index and term alone, the last match winning, would install
// the stale peer's under the leader's MsgSnap.
func TestStaleTermSnapshotDataNotInstalled(t *testing.T) {
	n := openNode1(t, testConfig())
	thaw := make(chan struct{})
	if err := n.freeze(time.Hour, thaw); err != nil {
		t.Fatal(err)
	}
	// The leader of term 5 (node 2).
	good := peer.TransferID{Index: 200, Term: 4, Nonce: 1}
	m := snapMsg(200, 4)
	m.Term = new(uint64(5))
	handleAll(t, reader(t, n, 2), beginFrame(good), chunkFrame(good, 150, "a", "leader's"), endFrame(t, good, m))
	// A node that is not the leader, at an older term (node 3, term 4).
	stale := peer.TransferID{Index: 200, Term: 4, Nonce: 2}
	m3 := snapMsg(200, 4)
	m3.From, m3.Term = new(uint64(3)), new(uint64(4))
	handleAll(t, reader(t, n, 3), beginFrame(stale), chunkFrame(stale, 150, "a", "stale peer's"), endFrame(t, stale, m3))
	close(thaw)

	waitFor(t, "the snapshot at 200 to be installed", func() bool { return n.Status().Applied == 200 })
	if st := n.Status(); st.Term != 5 || st.LeaderID != 2 {
		t.Fatalf("status %+v: want term 5 led by 2", st)
	}
	want := map[string]versioned{"a": {"leader's", 150}}
	if got := kvState(t, n); !maps.Equal(got, want) {
		t.Fatalf("installed %v; want the data of the MsgSnap raft accepted, %v", got, want)
	}
}
