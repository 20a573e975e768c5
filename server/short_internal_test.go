package server

import (
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
)

// skipShort skips a test of several seconds (a cluster, a fault, a load
// held for a while) under -short: make test-short is the quick loop, and
// make test runs everything.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a multi-second cluster test; make test runs it")
	}
}

// TestStatusNamesOfRevisions: reads and compactions refused for their
// revision are counted under names, as etcd's errors are worded.
func TestStatusNamesOfRevisions(t *testing.T) {
	for st, want := range map[wire.Status]string{wire.StatusCompacted: "compacted", wire.StatusFutureRevision: "future_revision"} {
		if got := statusName(st); got != want {
			t.Errorf("statusName(%d) = %q, want %q", st, got, want)
		}
	}
}
