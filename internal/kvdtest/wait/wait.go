package wait

import (
	"errors"
	"testing"
	"time"
)

// Timeout is how long For waits. It is generous because kvd's tests run
// under -race on small shared machines, where an election or a retry can
// take seconds; a condition that is going to hold holds far sooner.
const Timeout = 30 * time.Second

// maxPoll bounds the interval between two looks at the condition.
const maxPoll = 20 * time.Millisecond

// For polls cond until it holds, and fails t if it still does not after
// Timeout. what names the condition in the failure ("the leader to step
// down").
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Timeout, what, cond)
}

// Within is For with its own deadline, for a test whose claim is that the
// condition holds within d.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := poll(d, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}); err != nil {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// NoError polls f until it returns nil, as For, and on failure shows the
// last error f returned: for a wait that is a call retried until it works
// (a node accepting a put), where that error says why it never did.
func NoError(t testing.TB, what string, f func() error) {
	t.Helper()
	if err := poll(Timeout, f); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", Timeout, what, err)
	}
}

// errNotYet is a condition's error while it does not hold.
var errNotYet = errors.New("not yet")

// poll calls f until it returns nil or d has passed, and returns f's last
// error. It starts polling fast, as most conditions hold almost at once,
// and backs off so a long wait does not spin.
func poll(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for p := time.Millisecond; ; p = min(2*p, maxPoll) {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(p)
	}
}
