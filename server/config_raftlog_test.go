package server

import "testing"

// TestConfigRaftLog: the two places for the Raft log, and the default.
func TestConfigRaftLog(t *testing.T) {
	t.Parallel()
	base := Config{Listen: "x", DataDir: "d", Transport: limitless{}}
	for _, tc := range []struct {
		mode string
		ok   bool
	}{{"", true}, {"pebble", true}, {"wal", true}, {"WAL", false}, {"files", false}} {
		c := base
		c.RaftLog = tc.mode
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("RaftLog %q: Validate() = %v", tc.mode, err)
		}
		if got := c.withDefaults().raftConfig().RaftLog; got != tc.mode {
			t.Errorf("RaftLog %q reaches raft as %q", tc.mode, got)
		}
	}
}
