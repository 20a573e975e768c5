package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Log rate limits: each kind of line (keyed by its message) may burst to
// logBurst lines, then gets logRate lines a second. A line that follows
// suppressed ones says how many were dropped ("suppressed"). On a full disk
// Pebble can log thousands of identical errors a second.
const (
	logBurst = 10
	logRate  = 1.0 // lines per second, per kind
)

// limitedLog is a rate-limited slog.Logger; a nil logger discards.
type limitedLog struct {
	l   *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*logBucket
}

type logBucket struct {
	tokens     float64
	last       time.Time
	suppressed int
}

func newLimitedLog(l *slog.Logger) *limitedLog {
	return &limitedLog{l: l, now: time.Now, buckets: map[string]*logBucket{}}
}

// log writes msg at level unless lines of its kind (msg) exceed the rate.
func (g *limitedLog) log(level slog.Level, msg string, args ...any) {
	g.logKeyed(level, msg, msg, args...)
}

// logKeyed is log with the kind of line named by key.
func (g *limitedLog) logKeyed(level slog.Level, key, msg string, args ...any) {
	if g.l == nil || !g.l.Enabled(context.Background(), level) {
		return
	}
	g.mu.Lock()
	b := g.buckets[key]
	now := g.now()
	if b == nil {
		if len(g.buckets) > 1024 { // messages that embed values: bound the map
			clear(g.buckets)
		}
		b = &logBucket{tokens: logBurst, last: now}
		g.buckets[key] = b
	}
	b.tokens = min(logBurst, b.tokens+now.Sub(b.last).Seconds()*logRate)
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		g.mu.Unlock()
		return
	}
	b.tokens--
	if b.suppressed > 0 {
		args = append(args, "suppressed", b.suppressed)
		b.suppressed = 0
	}
	g.mu.Unlock()
	g.l.Log(context.Background(), level, msg, args...)
}

// always logs at Error, unlimited: for lines that come once per store.
func (g *limitedLog) always(msg string, args ...any) {
	if g.l != nil {
		g.l.Error(msg, args...)
	}
}

// pebbleLogger sends Pebble's messages to slog, rate-limited, informational
// ones at Debug. Fatalf, Pebble's report of an error it cannot go on from,
// records a storage fault and parks the calling goroutine instead of
// crashing the process (see fault.go): panicking there may unwind through a
// deferred Unlock of a mutex Pebble had released, a second, fatal error
// that would hide the first.
type pebbleLogger struct {
	log   *limitedLog
	fault *faultState
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.log.logKeyed(slog.LevelDebug, format, fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	// Keyed by the format, not the formatted line, so that lines differing
	// only in a file number share one limit.
	p.log.logKeyed(slog.LevelError, format, fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	cause := errors.New(fmt.Sprintf(format, args...))
	p.log.always("pebble: fatal error", "component", "pebble", "err", cause)
	p.fault.trip(cause)
	p.fault.park()
}

// eventListener reports Pebble's events that matter to an operator,
// rate-limited, turns data corruption into a fault, and notes in flushed
// how far completed flushes made Pebble's writes durable.
func eventListener(log *limitedLog, f *faultState, flushed *flushMark) *pebble.EventListener {
	return &pebble.EventListener{
		FlushEnd: flushed.note,
		BackgroundError: func(err error) {
			log.log(slog.LevelError, "pebble background error", "component", "pebble", "err", err)
			if isFaultErrno(err) {
				f.trip(err)
			}
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			err := fmt.Errorf("pebble: data corruption: %s", info)
			log.always("pebble: data corruption", "component", "pebble", "err", err)
			f.trip(err)
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			if f.tripped() {
				return // a write parked after the fault (fault.go), not a slow disk
			}
			log.log(slog.LevelWarn, "disk slow: a write or sync is taking long", "component", "pebble",
				"path", info.Path, "op", info.OpType.String(), "duration", info.Duration)
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			log.log(slog.LevelWarn, "pebble write stall: writes wait for flushes and compactions",
				"component", "pebble", "reason", info.Reason)
		},
		WriteStallEnd: func() {
			log.log(slog.LevelInfo, "pebble write stall ended", "component", "pebble")
		},
		LowDiskSpace: func(info pebble.LowDiskSpaceInfo) {
			log.log(slog.LevelWarn, "disk space low", "component", "pebble",
				"avail_bytes", info.AvailBytes, "total_bytes", info.TotalBytes, "below_percent", info.PercentThreshold)
		},
	}
}
