package raft

import (
	"context"
	"fmt"
	"log/slog"
)

// raftLogger routes etcd raft's log lines to slog. Lines below the
// handler's level are not even formatted: raft's debug output is chatty.
//
// Raft's Info lines go out at Debug: they narrate its internals (each
// pre-vote, vote and configuration switch; a three-node start is dozens),
// which drown a node's own info lines and mean nothing to an operator who
// has not read raft. What an operator needs from them is logged by the
// loop in its own words (the leader changes, membership changes); raft's
// warnings and errors stay what they are. --log-level debug shows it all.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) print(level slog.Level, v []any) {
	if r.l.Enabled(context.Background(), level) {
		r.l.Log(context.Background(), level, fmt.Sprint(v...), "component", "etcd-raft")
	}
}

func (r raftLogger) printf(level slog.Level, format string, v []any) {
	if r.l.Enabled(context.Background(), level) {
		r.l.Log(context.Background(), level, fmt.Sprintf(format, v...), "component", "etcd-raft")
	}
}

func (r raftLogger) Debug(v ...any)                   { r.print(slog.LevelDebug, v) }
func (r raftLogger) Debugf(format string, v ...any)   { r.printf(slog.LevelDebug, format, v) }
func (r raftLogger) Info(v ...any)                    { r.print(slog.LevelDebug, v) }
func (r raftLogger) Infof(format string, v ...any)    { r.printf(slog.LevelDebug, format, v) }
func (r raftLogger) Warning(v ...any)                 { r.print(slog.LevelWarn, v) }
func (r raftLogger) Warningf(format string, v ...any) { r.printf(slog.LevelWarn, format, v) }
func (r raftLogger) Error(v ...any)                   { r.print(slog.LevelError, v) }
func (r raftLogger) Errorf(format string, v ...any)   { r.printf(slog.LevelError, format, v) }
func (r raftLogger) Fatal(v ...any)                   { r.Panic(v...) }
func (r raftLogger) Fatalf(format string, v ...any)   { r.Panicf(format, v...) }

// Panic and Panicf log, then panic: raft calls them on broken invariants.
func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.l.Error(s, "component", "etcd-raft")
	panic(s)
}

func (r raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	r.l.Error(s, "component", "etcd-raft")
	panic(s)
}
