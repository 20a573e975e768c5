package raft

import (
	"testing"

	"github.com/kvd-project/kvd/raft/internal/store"
)

// TestRemovedNodeReportsNoLeader: a node that has applied its own removal
// reports no leader, though etcd raft still names the last one it knew
// (review: a removed follower kept accepting watches that could never see
// another event, and kept publishing the old leader as its region's hint).
func TestRemovedNodeReportsNoLeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []uint64
		want    uint64
	}{
		{"a member", []uint64{1, 2, 3}, 3},
		{"removed", []uint64{2, 3}, 0},
		{"no configuration yet", nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := store.Open(t.TempDir(), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			u := st.NewUpdate()
			for _, id := range tc.members {
				if err := u.SetMember(store.Member{ID: id, Addr: "127.0.0.1:1"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := u.Commit(true); err != nil {
				t.Fatal(err)
			}
			m, _ := newMetrics(nil)
			l := &loop{n: &Node{id: 1, log: testLogger(), metrics: m}, st: st, lead: 3, term: 2}
			l.publishStatus()
			if got := l.n.Status().LeaderID; got != tc.want {
				t.Fatalf("LeaderID %d, want %d", got, tc.want)
			}
		})
	}
}
