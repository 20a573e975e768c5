package wait

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeTB records a failure instead of stopping the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	For(t, "the third look", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestWithinFailsAfterTheDeadline(t *testing.T) {
	f := &fakeTB{TB: t}
	start := time.Now()
	looks := 0
	Within(f, 50*time.Millisecond, "never", func() bool {
		looks++
		// Fatalf does not stop the loop here: end it on the next look.
		return f.failed != ""
	})
	if f.failed == "" {
		t.Fatal("Within did not fail")
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("failed after %v, before the deadline", el)
	}
	if looks < 2 {
		t.Fatalf("cond looked at %d times", looks)
	}
}

func TestNoErrorShowsTheLastError(t *testing.T) {
	f := &fakeTB{TB: t}
	n := 0
	NoError(f, "a put", func() error {
		n++
		if n == 3 {
			return nil
		}
		return errors.New("not leader")
	})
	if n != 3 || f.failed != "" {
		t.Fatalf("%d calls, failure %q; want 3 calls and none", n, f.failed)
	}
	// On a timeout the failure names the last error. (A fakeTB's Fatalf
	// returns, so a short poll stands in for Timeout.)
	err := poll(20*time.Millisecond, func() error { return errors.New("not leader") })
	if err == nil || !strings.Contains(err.Error(), "not leader") {
		t.Fatalf("poll returned %v after its deadline, want the last error", err)
	}
}
