package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// linesWriter collects output and cancels once it holds n lines.
type linesWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	n      int
	cancel context.CancelFunc
}

func (w *linesWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Count(w.buf.String(), "\n") >= w.n {
		w.cancel()
	}
	return len(p), nil
}

// watchKvctl runs kvctl watch ARGS until it printed n lines (or 20s).
func watchKvctl(t *testing.T, ep string, n int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := &linesWriter{n: n, cancel: cancel}
	var errOut bytes.Buffer
	if code := report(runIn(ctx, append([]string{"--endpoints", ep, "watch"}, args...), nil, out, &errOut), &errOut); code != 0 {
		t.Fatalf("kvctl watch %v: exit %d: %s", args, code, errOut.String())
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	return out.buf.String()
}

// TestWatch: kvctl watch prints docs/kvctl.md's format, from a version, for
// a key or a prefix, and -w json; its flags are refused elsewhere.
func TestWatch(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string { t.Helper(); return mustKvctl(t, ep, args...) }
	must("put", "cfg/a", "1")
	from := version(t, ep, "cfg/a")
	must("put", "other", "x")
	must("put", "cfg/b", "two words")
	vb := version(t, ep, "cfg/b")
	must("del", "cfg/a")
	got := watchKvctl(t, ep, 3, "--prefix", "cfg/", "--rev", fmt.Sprint(from))
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 3 || lines[0] != fmt.Sprintf("%d PUT cfg/a 1", from) || lines[1] != fmt.Sprintf("%d PUT cfg/b \"two words\"", vb) ||
		!strings.HasSuffix(lines[2], " DELETE cfg/a") {
		t.Fatalf("watch --prefix cfg/ --rev %d:\n%s", from, got)
	}
	if got := watchKvctl(t, ep, 1, "cfg/b", "--rev", "1", "-w", "json"); got != fmt.Sprintf(`{"type":"PUT","key":"cfg/b","value":"two words","mod_revision":%d}`+"\n", vb) {
		t.Fatalf("watch -w json cfg/b: %q", got)
	}
	for _, args := range [][]string{
		{"put", "cfg/a", "x", "--rev", "3"},
		{"watch", "cfg/", "--prefix", "--limit", "2"},
		{"watch"},
	} {
		if _, _, code := kvctlAt(ep, "", args...); code != 2 {
			t.Errorf("kvctl %v: exit %d, want 2 (usage)", args, code)
		}
	}
}
