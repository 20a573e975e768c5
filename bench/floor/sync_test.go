package floor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelperAppend is run by TestLogSyncIsFdatasync under strace.
func TestHelperAppend(t *testing.T) {
	dir := os.Getenv("FLOOR_SYNC_DIR")
	if dir == "" {
		t.Skip("a helper process of TestLogSyncIsFdatasync, not a test of its own")
	}
	l, err := OpenLog(filepath.Join(dir, "log"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.WriteFile(filepath.Join(dir, "marker"), nil, 0o600) // the appends follow in the trace
	for range 3 {
		if err := l.Append(make([]byte, 6000)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogSyncIsFdatasync: the floor's log syncs each batch with fdatasync,
// as Pebble syncs its WAL and as the docs say; it called fsync, which also
// writes the inode.
func TestLogSyncIsFdatasync(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("SKIPPED: strace is not installed; this test needs it to see which sync the log calls")
	}
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace")
	cmd := exec.Command(strace, "-f", "-e", "trace=fsync,fdatasync,openat", "-o", trace,
		os.Args[0], "-test.run=^TestHelperAppend$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FLOOR_SYNC_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("strace: %v\n%s", err, out)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "marker")
	if !ok {
		t.Fatalf("no marker in the trace:\n%s", b)
	}
	var fsyncs, fdatasyncs int
	for _, line := range strings.Split(after, "\n") {
		switch {
		case strings.Contains(line, "fdatasync("):
			fdatasyncs++
		case strings.Contains(line, "fsync("):
			fsyncs++
		}
	}
	if fdatasyncs != 3 || fsyncs != 0 {
		t.Errorf("3 appends made %d fdatasyncs and %d fsyncs, want 3 and 0; the trace after the open:\n%s", fdatasyncs, fsyncs, after)
	}
}
