package raft

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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

// lockedBuffer is a bytes.Buffer several nodes' loggers write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLeaderLoggedAtInfo: with raft's own lines at debug, the loop says at
// info which member leads (logLeader), so a node's info log still shows
// every election's outcome.
func TestLeaderLoggedAtInfo(t *testing.T) {
	var buf lockedBuffer
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c := newCluster(t, 3, cfg)
	c.put("k", "v")
	lead := c.leader()
	got, want := buf.String(), fmt.Sprintf(`leader=%d term=`, lead.id)
	if !strings.Contains(got, `level=INFO msg="leader elected"`) || !strings.Contains(got, want) {
		t.Fatalf("no leader elected, %q, at info in:\n%s", want, got)
	}
}
