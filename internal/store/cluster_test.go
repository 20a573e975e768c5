package store

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestClusterIDPersists checks the cluster id survives a restart, can be
// recorded again unchanged, and is never replaced by another.
func TestClusterIDPersists(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, 0)
	if id := s.ClusterID(); id != 0 {
		t.Fatalf("fresh store has cluster id %x", id)
	}
	if err := s.SetClusterID(0); !errors.Is(err, ErrClusterID) {
		t.Fatalf("SetClusterID(0): %v", err)
	}
	if err := s.SetClusterID(0xabc); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, 0)
	defer s.Close()
	if id := s.ClusterID(); id != 0xabc {
		t.Fatalf("cluster id after reopen = %x, want abc", id)
	}
	if err := s.SetClusterID(0xabc); err != nil {
		t.Fatalf("recording the same id again: %v", err)
	}
	if err := s.SetClusterID(0xdef); !errors.Is(err, ErrClusterID) {
		t.Fatalf("replacing the cluster id: %v", err)
	}
	if id := s.ClusterID(); id != 0xabc {
		t.Fatalf("cluster id after a refused change = %x", id)
	}
}

// TestRecordsSurviveAPowerCut: the records written outside the raft log
// (cluster and node ids, the removal and the restore's checksum) are
// durable once recorded, in the "wal" mode too, where Pebble keeps no log
// of its own and the log cannot re-create them.
func TestRecordsSurviveAPowerCut(t *testing.T) {
	for _, pebbleWAL := range []bool{true, false} {
		mem := vfs.NewCrashableMem()
		s := openWAL(t, mem, pebbleWAL)
		if err := errors.Join(s.SetClusterID(0xabc), s.SetNodeID(7), s.SetRemovedBy(3), s.SetRestoredFrom([]byte("sum"))); err != nil {
			t.Fatal(err)
		}
		s2 := openWAL(t, mem.CrashClone(vfs.CrashCloneCfg{}), pebbleWAL)
		by, removed, err := s2.RemovedBy()
		sum, serr := s2.RestoredFrom()
		node, nerr := s2.NodeID()
		if err := errors.Join(err, serr, nerr); err != nil {
			t.Fatal(err)
		}
		if s2.ClusterID() != 0xabc || node != 7 || !removed || by != 3 || string(sum) != "sum" {
			t.Errorf("Pebble's WAL %v: after the cut: cluster %x, node %d, removed by %d (%v), restored from %q",
				pebbleWAL, s2.ClusterID(), node, by, removed, sum)
		}
		s2.Close()
		s.Close()
	}
}
