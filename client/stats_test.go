package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestStatsReadsAndBytes: Stats counts, for every successful one-sided GET,
// the round trips, READs and bytes the transport saw that GET post.
func TestStatsReadsAndBytes(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, ct := newCountingClient(t, kvdtest.Endpoints(nodes))
	ctx := context.Background()
	value := make([]byte, 300)
	if err := c.Put(ctx, []byte("k"), value); err != nil {
		t.Fatal(err)
	}
	// Warm the connection (dial, hello, geometry) so only GETs are counted.
	if _, err := c.Get(ctx, []byte("warm")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("warm-up get: %v", err)
	}
	for _, tc := range []struct {
		name     string
		key      string
		wantErr  error
		minBytes uint64 // at least the value must have been read, on a hit
	}{
		{"uncached hit", "k", nil, 300},
		{"cached hit", "k", nil, 300},
		{"miss", "nope", client.ErrNotFound, 0},
	} {
		s0, b0, o0, n0 := c.Stats(), ct.reads.Load(), ct.ops.Load(), ct.bytes.Load()
		if _, err := c.Get(ctx, []byte(tc.key)); !errors.Is(err, tc.wantErr) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.wantErr)
		}
		s1 := c.Stats()
		if s1.Retries["torn"]+s1.Retries["unstable"]+s1.Retries["stale"] != s0.Retries["torn"]+s0.Retries["unstable"]+s0.Retries["stale"] {
			t.Skipf("%s: the GET was retried; counts would include the failed attempt's READs", tc.name)
		}
		rounds, reads, nbytes := s1.OneSidedRounds-s0.OneSidedRounds, s1.OneSidedReads-s0.OneSidedReads, s1.OneSidedBytes-s0.OneSidedBytes
		if want := uint64(ct.reads.Load() - b0); rounds != want {
			t.Errorf("%s: Stats counted %d round trips, the transport saw %d", tc.name, rounds, want)
		}
		if want := uint64(ct.ops.Load() - o0); reads != want || reads < rounds {
			t.Errorf("%s: Stats counted %d READs, the transport saw %d (in %d round trips)", tc.name, reads, want, rounds)
		}
		if want := uint64(ct.bytes.Load() - n0); nbytes != want || nbytes < tc.minBytes {
			t.Errorf("%s: Stats counted %d bytes read, the transport saw %d (want >= %d)", tc.name, nbytes, want, tc.minBytes)
		}
		t.Logf("%s: %d round trips, %d READs, %d bytes", tc.name, rounds, reads, nbytes)
	}
}
