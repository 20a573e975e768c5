package server

import "testing"

// TestConfigRaftLog: the two places for the Raft log, the default
// (the WAL), and the WAL's segment size knob reaching raft.
func TestConfigRaftLog(t *testing.T) {
	t.Parallel()
	base := Config{Listen: "x", DataDir: "d", Transport: limitless{}}
	for _, tc := range []struct {
		mode, reaches string
		ok            bool
	}{{"", "wal", true}, {"pebble", "pebble", true}, {"wal", "wal", true}, {"WAL", "WAL", false}, {"files", "files", false}} {
		c := base
		c.RaftLog = tc.mode
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("RaftLog %q: Validate() = %v", tc.mode, err)
		}
		if got := c.withDefaults().raftConfig().RaftLog; got != tc.reaches {
			t.Errorf("RaftLog %q reaches raft as %q, want %q", tc.mode, got, tc.reaches)
		}
	}
	c := base
	c.Knobs.WALSegmentSize = 1 << 20
	if got := c.withDefaults().raftConfig().Knobs.WALSegmentSize; got != 1<<20 {
		t.Errorf("Knobs.WALSegmentSize 1 MiB reaches raft as %d", got)
	}
}
