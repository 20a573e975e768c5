package store

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestFatalfRecordsFaultAndParks: Pebble's Fatalf (an error it cannot go
// on from) records a storage fault, refuses every later write, and parks
// the calling goroutine instead of panicking: a panic there may unwind
// through a deferred Unlock of a mutex Pebble had released and crash the
// process with a second fatal error that hides the first.
func TestFatalfRecordsFaultAndParks(t *testing.T) {
	var faults []error
	s, err := Open(t.TempDir(), Options{WALSegmentSize: testSegmentSize, OnFault: func(err error) { faults = append(faults, err) }})
	if err != nil {
		t.Fatal(err)
	}
	if s.Fault() != nil {
		t.Fatalf("Fault() = %v on a new store", s.Fault())
	}
	returned := make(chan any, 1)
	go func() {
		defer func() { returned <- recover() }()
		pebbleLogger{log: newLimitedLog(nil), fault: s.fault}.Fatalf("MANIFEST sync failed: %s", "input/output error")
	}()
	select {
	case <-s.Faulted():
	case <-time.After(10 * time.Second):
		t.Fatal("no fault recorded")
	}
	select {
	case r := <-returned:
		t.Fatalf("Fatalf returned (recovered %v); it must park", r)
	case <-time.After(100 * time.Millisecond):
	}
	if got := s.Fault(); got == nil || got.Error() != "MANIFEST sync failed: input/output error" {
		t.Fatalf("Fault() = %v", got)
	}
	if len(faults) != 1 {
		t.Fatalf("OnFault called %d times", len(faults))
	}
	u := s.NewUpdate()
	if err := u.Put([]byte("k"), []byte("v"), mod(1)); err != nil {
		t.Fatal(err)
	}
	err = u.Commit(true)
	var fe *FaultError
	if !errors.Is(err, ErrFault) || !errors.As(err, &fe) || !strings.Contains(err.Error(), "MANIFEST sync failed") {
		t.Fatalf("Commit after the fault = %v", err)
	}
	if err := s.Close(); !errors.Is(err, ErrFault) {
		t.Fatalf("Close = %v, want the fault", err)
	}
}

// TestLimitedLog: a storm of one kind of line is cut to the burst and then
// logRate a second, and the next line logged says how many were dropped;
// other kinds are not held back by it.
func TestLimitedLog(t *testing.T) {
	var buf bytes.Buffer
	g := newLimitedLog(slog.New(slog.NewTextHandler(&buf, nil)))
	now := time.Unix(0, 0)
	g.now = func() time.Time { return now }
	for range 2400 { // a second of what Pebble logged on a full disk
		g.log(slog.LevelError, "pebble background error", "err", "no space left on device")
		now = now.Add(time.Second / 2400)
	}
	g.log(slog.LevelWarn, "disk slow")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	storm := 0
	for _, l := range lines {
		if strings.Contains(l, "pebble background error") {
			storm++
		}
	}
	if storm > logBurst+2 || storm < logBurst {
		t.Fatalf("%d lines of the storm logged in a second, want about %d:\n%s", storm, logBurst+1, buf.String())
	}
	if !strings.Contains(lines[len(lines)-1], "disk slow") {
		t.Fatalf("another kind of line was held back:\n%s", buf.String())
	}
	buf.Reset()
	now = now.Add(2 * time.Second)
	g.log(slog.LevelError, "pebble background error", "err", "no space left on device")
	if !strings.Contains(buf.String(), "suppressed=") {
		t.Fatalf("the line after a storm does not count the dropped ones: %s", buf.String())
	}
}

// TestCloseFaultReturns: closing writes too (the WAL's unsynced tail is
// synced); an fsync that fails there makes Close return the fault at once
// rather than wait forever on the parked sync.
func TestCloseFaultReturns(t *testing.T) {
	var failSync atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failSync.Load() && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) {
			return &os.PathError{Op: "sync", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	}))
	s, err := Open(t.TempDir(), Options{FS: fs, WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	u := s.NewUpdate()
	if err := u.Put([]byte("k"), []byte("v"), mod(1)); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(false); err != nil { // in the WAL, not synced
		t.Fatal(err)
	}
	failSync.Store(true)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, ErrFault) || !strings.Contains(err.Error(), "input/output error") {
			t.Fatalf("Close = %v, want the fsync fault", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs on the failed fsync")
	}
}
