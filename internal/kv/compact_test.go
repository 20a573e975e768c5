package kv

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/revision"
)

// readAt is key's value at revision rev on n, or the error.
func readAt(tn *testNode, key string, rev uint64) (string, error) {
	var got string
	_, err := tn.node.RangeAt([]byte(key), append([]byte(key), 0), rev, func(_, v []byte, _ revision.Meta) bool {
		got = string(v)
		return true
	})
	return got, err
}

// TestCompactIsReplicated: a compaction is applied by every member at the
// same revision; past reads above it still answer, below it fail as
// compacted, everywhere; a future or repeated compaction is refused as
// etcd refuses it.
func TestCompactIsReplicated(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	var revs []uint64
	for i := range 5 {
		revs = append(revs, c.put("k", fmt.Sprint(i)))
	}
	ctx := ctxT(t)
	lead := c.leader()
	if _, err := lead.node.Compact(ctx, revs[4]+1); !errors.Is(err, errs.ErrFutureRevision) {
		t.Fatalf("compact past the revision: %v, want ErrFutureRevision", err)
	}
	if _, err := lead.node.Compact(ctx, revs[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := lead.node.Compact(ctx, revs[2]); !errors.Is(err, errs.ErrCompacted) {
		t.Fatalf("compact again at %d: %v, want ErrCompacted", revs[2], err)
	}
	for _, tn := range c.running() {
		c.caughtUp(tn)
		if got := tn.node.CompactRevision(); got != revs[2] {
			t.Errorf("node %d compacted at %d, want %d", tn.id, got, revs[2])
		}
		if _, err := readAt(tn, "k", revs[1]); !errors.Is(err, errs.ErrCompacted) {
			t.Errorf("node %d: read at %d below the compaction: %v, want ErrCompacted", tn.id, revs[1], err)
		}
		for i := 2; i < 5; i++ {
			if got, err := readAt(tn, "k", revs[i]); err != nil || got != fmt.Sprint(i) {
				t.Errorf("node %d: k at %d = %q, %v; want %d", tn.id, revs[i], got, err, i)
			}
		}
	}
}

// TestAutoCompactionPeriodic: the leader compacts the history to the
// revision it had a retention ago, by its clock.
func TestAutoCompactionPeriodic(t *testing.T) {
	clk := &manualClock{t: time.Unix(1000, 0)}
	cfg := testConfig()
	cfg.LeaseClock, cfg.AutoCompactionRetention = clk.now, "10m"
	c := newCluster(t, 1, cfg)
	first := c.put("k", "0")
	wait.For(t, "the leader to sample the first revision", func() bool {
		clk.advance(time.Minute)
		return c.leader().node.CompactRevision() > 0
	})
	if got := c.leader().node.CompactRevision(); got < first {
		t.Fatalf("compacted at %d, want at least %d", got, first)
	}
}

// TestAutoCompactionDue: when each mode compacts, and to what.
func TestAutoCompactionDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	periodic := autoCompactor{policy: compactPolicy{period: 10 * time.Minute}}
	steps := []struct {
		now       time.Time
		rev, comp uint64
		want      uint64
	}{
		{at(0), 5, 0, 0},
		{at(time.Minute), 9, 0, 0},
		{at(10 * time.Minute), 30, 0, 5}, // the revision of 10 minutes ago
		{at(10*time.Minute + time.Second), 31, 5, 0},
		{at(11 * time.Minute), 40, 5, 9},
	}
	for i, s := range steps {
		if got := periodic.due(s.now, s.rev, s.comp); got != s.want {
			t.Errorf("periodic step %d: due %d, want %d", i, got, s.want)
		}
	}
	byRev := autoCompactor{policy: compactPolicy{revs: 100}}
	if got := byRev.due(t0, 50, 0); got != 0 {
		t.Errorf("revision mode below the retention: %d", got)
	}
	if got := byRev.due(t0.Add(revisionCheckEvery), 250, 0); got != 150 {
		t.Errorf("revision mode: due %d, want 150", got)
	}
	if got := byRev.due(t0.Add(revisionCheckEvery+time.Second), 260, 150); got != 0 {
		t.Errorf("revision mode checked again before its interval: %d", got)
	}
	off := autoCompactor{}
	if got := off.due(t0.Add(time.Hour), 1000, 0); got != 0 {
		t.Errorf("off: due %d", got)
	}
}

// TestAutoCompactionConfig: etcd's flag values parse, and bad ones are
// refused by Validate.
func TestAutoCompactionConfig(t *testing.T) {
	for _, tc := range []struct {
		mode, retention string
		want            compactPolicy
		bad             bool
	}{
		{"periodic", "1h", compactPolicy{period: time.Hour}, false},
		{"periodic", "2", compactPolicy{period: 2 * time.Hour}, false},
		{"periodic", "0", compactPolicy{}, false},
		{"revision", "1000", compactPolicy{revs: 1000}, false},
		{"revision", "1h", compactPolicy{}, true},
		{"periodic", "soon", compactPolicy{}, true},
		{"weekly", "1", compactPolicy{}, true},
	} {
		got, err := parseAutoCompaction(tc.mode, tc.retention)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("%s %s: %+v, %v", tc.mode, tc.retention, got, err)
		}
		cfg := testConfig()
		cfg.AutoCompactionMode, cfg.AutoCompactionRetention = tc.mode, tc.retention
		if err := cfg.Validate(); (err != nil && strings.Contains(err.Error(), "auto-compaction")) != tc.bad {
			t.Errorf("%s %s: Validate = %v", tc.mode, tc.retention, err)
		}
	}
}

// TestDeleteRange: a range delete deletes every key of the range in one
// revision, gives their previous values, records each deletion in the
// history, and deletes nothing when the range is empty.
func TestDeleteRange(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	for _, k := range []string{"a", "p/1", "p/2", "p/3", "q"} {
		c.put(k, "v"+k)
	}
	lead := c.leader()
	ctx := ctxT(t)
	before := lead.node.Revision()
	n, prev, rev, err := lead.node.DeleteRange(ctx, []byte("p/"), []byte("p0"), true)
	if err != nil || n != 3 || len(prev) != 3 || rev != before+1 {
		t.Fatalf("delete p/: %d deleted, %d prev, revision %d (was %d), %v", n, len(prev), rev, before, err)
	}
	if string(prev[1].Key) != "p/2" || string(prev[1].Value) != "vp/2" || prev[1].Meta.Version != 1 {
		t.Fatalf("prev[1] = %+v", prev[1])
	}
	n, _, rev2, err := lead.node.DeleteRange(ctx, []byte("p/"), []byte("p0"), false)
	if err != nil || n != 0 || rev2 != rev {
		t.Fatalf("delete of an empty range: %d, revision %d (want %d), %v", n, rev2, rev, err)
	}
	for _, tn := range c.running() {
		c.caughtUp(tn)
		got := map[string]string{}
		if _, err := tn.node.RangeAt(nil, nil, 0, func(k, v []byte, _ revision.Meta) bool { got[string(k)] = string(v); return true }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "map[a:va q:vq]" {
			t.Errorf("node %d after the delete: %v", tn.id, got)
		}
		if v, err := readAt(tn, "p/2", rev-1); err != nil || v != "vp/2" {
			t.Errorf("node %d: p/2 before the delete: %q, %v", tn.id, v, err)
		}
	}
}
