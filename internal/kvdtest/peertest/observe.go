package peertest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// LogCapture collects log lines, to check what was said.
type LogCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (lc *LogCapture) Write(p []byte) (int, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.buf.Write(p)
}

// Logger logs to lc, at Info and above.
func (lc *LogCapture) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(lc, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Lines is how many lines were logged.
func (lc *LogCapture) Lines() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return strings.Count(lc.buf.String(), "\n")
}

// Contains reports whether s was logged.
func (lc *LogCapture) Contains(s string) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return strings.Contains(lc.buf.String(), s)
}

// CounterValue is the value of the counter c.
func CounterValue(t testing.TB, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
