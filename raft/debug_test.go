package raft

import (
	"log/slog"
	"os"
	"testing"
)

func TestDebugLease(t *testing.T) {
	if os.Getenv("RAFT_DEBUG") == "" {
		t.Skip()
	}
	old := testConfig
	_ = old
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	TestLeaseLapsesBeforeNewLeader(t)
}
