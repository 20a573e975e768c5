package wait

import (
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
	deadline := time.Now().Add(d)
	// Start polling fast, as most conditions hold almost at once, and back
	// off so a long wait does not spin.
	for poll := time.Millisecond; !cond(); poll = min(2*poll, maxPoll) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(poll)
	}
}
