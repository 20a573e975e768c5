package raft

import (
	"testing"

	"github.com/kvd-project/kvd/internal/store"
)

// TestRemovedNodeReportsNoLeader: a node that has applied its own removal
// reports no leader, though etcd raft still names the last one it knew
// (else a removed follower would keep accepting watches that can never see
// another event, and keep publishing the old leader as its region's hint).
// A joining node that is not in its address book yet is not removed.
func TestRemovedNodeReportsNoLeader(t *testing.T) {
	type change struct{ add, remove []uint64 } // applied to the address book
	for _, tc := range []struct {
		name   string
		phases []change // one before each publishStatus
		want   []uint64 // LeaderID after each
	}{
		{"a member", []change{{add: []uint64{1, 2, 3}}, {}}, []uint64{3, 3}},
		{"removed", []change{{add: []uint64{1, 2, 3}}, {remove: []uint64{1}}}, []uint64{3, 0}},
		{"another removed", []change{{add: []uint64{1, 2, 3}}, {remove: []uint64{2}}}, []uint64{3, 3}},
		{"joining", []change{{}, {add: []uint64{2, 3}}, {add: []uint64{1}}}, []uint64{3, 3, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := store.Open(t.TempDir(), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			m, _ := newMetrics(nil)
			l := &loop{n: &Node{id: 1, log: testLogger(), metrics: m}, st: st, sm: nopSM{}, lead: 3, term: 2}
			for i, ch := range tc.phases {
				u := st.NewUpdate()
				for _, id := range ch.remove {
					if err := u.RemoveMember(id); err != nil {
						t.Fatal(err)
					}
				}
				for _, id := range ch.add {
					if err := u.SetMember(store.Member{ID: id, Addr: "127.0.0.1:1"}); err != nil {
						t.Fatal(err)
					}
				}
				if err := u.Commit(true); err != nil {
					t.Fatal(err)
				}
				l.publishStatus()
				if got := l.n.Status().LeaderID; got != tc.want[i] {
					t.Fatalf("phase %d (%+v): LeaderID %d, want %d", i, ch, got, tc.want[i])
				}
			}
		})
	}
}
