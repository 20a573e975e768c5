package store

import (
	"errors"
	"testing"
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
