package etcdapi

import (
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestHeaderWaitsForUnknownClusterID: while the cluster id was never
// learnt (New's refresh failed: no leader yet) and the next refresh is not
// due, an answer's header waits for a refresh rather than carry cluster
// id 0, which etcdctl prints ("removed from cluster 0").
func TestHeaderWaitsForUnknownClusterID(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	kc, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kc.Close() })
	s, err := New(Config{Client: kc, MemberID: nodes[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	for s.headerBusy.Load() { // New's own refresh
		time.Sleep(10 * time.Millisecond)
	}
	// As after a refresh that failed: nothing known, the next one not due.
	s.clusterID.Store(0)
	s.headerNext.Store(time.Now().Add(time.Hour).UnixNano())
	if h := s.header(1); h.ClusterId == 0 || h.MemberId != nodes[0].ID {
		t.Fatalf("header %+v: want the cluster id and member %d", h, nodes[0].ID)
	}
}
