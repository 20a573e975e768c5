package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/server"
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
	if got := watchKvctl(t, ep, 1, "cfg/b", "--rev", "1", "-w", "json"); got != fmt.Sprintf(`{"type":"PUT","key":"cfg/b","value":"two words","create_revision":%d,"mod_revision":%d,"version":1}`+"\n", vb, vb) {
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

// TestWatchPrevKV: watch --prev-kv appends each event's previous value as
// a last field (none for a key that did not exist), and -w json prints
// it as prev_kv with its metadata.
func TestWatchPrevKV(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string { t.Helper(); return mustKvctl(t, ep, args...) }
	must("put", "k", "v1")
	r1 := version(t, ep, "k")
	must("put", "k", "two words")
	r2 := version(t, ep, "k")
	must("del", "k")
	got := watchKvctl(t, ep, 3, "k", "--prev-kv", "--rev", fmt.Sprint(r1))
	want := fmt.Sprintf("%d PUT k v1\n%d PUT k \"two words\" v1\n%d DELETE k \"two words\"\n", r1, r2, r2+1)
	if got != want {
		t.Fatalf("watch --prev-kv:\n%s\nwant\n%s", got, want)
	}
	got = watchKvctl(t, ep, 1, "k", "--prev-kv", "--rev", fmt.Sprint(r2), "-w", "json")
	got, _, _ = strings.Cut(got, "\n") // the delete may come in the same response
	want = fmt.Sprintf(`{"type":"PUT","key":"k","value":"two words","create_revision":%d,"mod_revision":%d,"version":2,"prev_kv":{"key":"k","value":"v1","create_revision":%d,"mod_revision":%d,"version":1}}`, r1, r2, r1, r1)
	if got != want {
		t.Fatalf("watch --prev-kv -w json:\n%s\nwant\n%s", got, want)
	}
	if _, _, code := kvctlAt(ep, "", "get", "k", "--progress-notify"); code != 2 {
		t.Errorf("get --progress-notify: exit %d, want 2 (usage)", code)
	}
}

// TestWatchProgressNotifyPrints: watch --progress-notify prints etcdctl's
// line for each progress notification (a short interval, by the knob).
func TestWatchProgressNotifyPrints(t *testing.T) {
	knobs := func(uint64) server.Knobs { return server.Knobs{WatchProgressNotifyInterval: 50 * time.Millisecond} }
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{Knobs: knobs})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	got := watchKvctl(t, nodes[0].Addr, 1, "quiet", "--progress-notify")
	if !regexp.MustCompile(`^progress notify: [0-9]+\n`).MatchString(got) {
		t.Fatalf("watch --progress-notify printed %q", got)
	}
	got = watchKvctl(t, nodes[0].Addr, 1, "quiet", "--progress-notify", "-w", "json")
	if !regexp.MustCompile(`^\{"type":"PROGRESS_NOTIFY","revision":[0-9]+\}\n`).MatchString(got) {
		t.Fatalf("watch --progress-notify -w json printed %q", got)
	}
}
