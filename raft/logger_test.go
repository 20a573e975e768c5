package raft

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestRaftInfoAtDebug: etcd raft's Info lines (its pre-votes, votes and
// configuration switches) are logged at Debug, so a node at the default
// info level shows none of them; its warnings stay at Warn.
func TestRaftInfoAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		r := raftLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))}
		r.Infof("1 became pre-candidate at term %d", 3)
		r.Info("1 switched to configuration voters=(1)")
		r.Warningf("1 stepped down")
		got := buf.String()
		wantInfo := level == slog.LevelDebug
		if strings.Contains(got, "pre-candidate") != wantInfo || strings.Contains(got, "voters=(1)") != wantInfo ||
			!strings.Contains(got, "level=WARN") {
			t.Errorf("at level %v: %q; raft's Info lines shown: %t, want %t; warnings always", level, got, !wantInfo, wantInfo)
		}
	}
}
