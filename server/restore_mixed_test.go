package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestRestoreFromMixedBackupsDiverges: the members of a new cluster are
// restored from two different backups of the same cluster (an operator
// copies backup.kvd to node 1 after a newer save replaced it). Nodes 2 and
// 3 (the older backup) elect a leader before node 1 (the newer) starts.
// Either node 1 must be refused (at start, or by its peers as another
// cluster), or the cluster must converge on one state:
// it must never serve a state of its own that the others do not have.
func TestRestoreFromMixedBackupsDiverges(t *testing.T) {
	old := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, old, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(old), client.Linearizable)
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("old")); err != nil {
		t.Fatal(err)
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	pathA, infoA := saveBackup(t, c, dirA)
	for i := range 50 {
		if err := c.Put(ctx, []byte("k"), fmt.Appendf(nil, "new-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Put(ctx, []byte("only-in-b"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	pathB, infoB := saveBackup(t, c, dirB)
	if infoB.Index <= infoA.Index {
		t.Fatalf("backups at %d and %d", infoA.Index, infoB.Index)
	}

	addrs := kvdtest.FreeAddrs(t, 3)
	cluster := map[uint64]string{1: addrs[0], 2: addrs[1], 3: addrs[2]}
	files := map[uint64]string{1: pathB, 2: pathA, 3: pathA}
	srvs := map[uint64]*server.Server{}
	start := func(id uint64) error {
		tr, err := tcp.New(tcp.Config{Node: cluster[id]})
		if err != nil {
			return err
		}
		s, err := server.New(server.Config{ID: id, Listen: cluster[id], DataDir: filepath.Join(t.TempDir(), "d"),
			InitialCluster: cluster, InitialClusterToken: "restored", Restore: files[id], Transport: tr, Logger: quietLog()})
		if err != nil {
			tr.Close()
			return err
		}
		srvs[id] = s
		t.Cleanup(func() { s.Close(); tr.Close() })
		return nil
	}
	for _, id := range []uint64{2, 3} {
		if err := start(id); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a leader among 2 and 3", func() bool {
		return srvs[2].Status().IsLeader || srvs[3].Status().IsLeader
	})
	if err := start(1); err != nil {
		t.Logf("node 1 refused at start: %v", err)
		return // a clear error: fine
	}
	if id1, id2 := srvs[1].Node().ClusterID(), srvs[2].Node().ClusterID(); id1 != id2 {
		t.Logf("node 1 is of cluster %016x, nodes 2 and 3 of %016x: they refuse each other", id1, id2)
		return // a clear refusal (logged and counted on both sides): fine
	}
	rc := newPatientClient(t, []string{addrs[1], addrs[2]}, client.Linearizable)
	for i := range 20 {
		if err := rc.Put(ctx, fmt.Appendf(nil, "after-%d", i), []byte("y")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	read := func(id uint64, key string) string {
		v, ver, err := newClient(t, []string{cluster[id]}, client.Serializable).GetVersion(ctx, []byte(key))
		return fmt.Sprintf("%q@%d err=%v", v, ver, err)
	}
	for _, key := range []string{"k", "only-in-b", "after-19"} {
		a, b, c3 := read(1, key), read(2, key), read(3, key)
		t.Logf("%s: node1 %s node2 %s node3 %s", key, a, b, c3)
		if a != b || b != c3 {
			t.Errorf("nodes disagree on %s: node 1 %s, node 2 %s, node 3 %s", key, a, b, c3)
		}
	}
	t.Logf("applied: 1=%d 2=%d 3=%d", srvs[1].Status().Applied, srvs[2].Status().Applied, srvs[3].Status().Applied)
}
