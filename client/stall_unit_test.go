package client

import (
	"testing"
	"time"
)

// TestAttemptsStalled runs the watchdog's judgement on injected times: a
// node is stalled only once an attempt has been outstanding, with none
// finished, for longer than the limit.
func TestAttemptsStalled(t *testing.T) {
	const limit = time.Second
	at := func(d time.Duration) mono { return mono(d) }
	var a attempts
	a.begin() // outstanding when the watchdog first looks: not stalled on sight
	if a.stalled(at(time.Hour), limit) {
		t.Fatal("stalled at the watchdog's first look")
	}
	a.end()
	steps := []struct {
		when       time.Duration
		begin, end int
		want       bool
		what       string
	}{
		{0, 0, 0, false, "idle"},
		{250 * time.Millisecond, 1, 0, false, "an attempt starts"},
		{time.Second, 0, 0, false, "outstanding 1s since the last idle look: not past the limit"},
		{1250 * time.Millisecond, 0, 0, true, "outstanding past the limit, none finished"},
		{1500 * time.Millisecond, 1, 1, false, "one finished: answering again"},
		{2600 * time.Millisecond, 0, 0, true, "the other outstanding since, past the limit"},
		{2700 * time.Millisecond, 0, 1, false, "all finished"},
		{5 * time.Second, 0, 0, false, "idle for long"},
		{5100 * time.Millisecond, 1, 0, false, "a new attempt after idling"},
		{6 * time.Second, 0, 0, false, "within the limit of the last idle look"},
	}
	for _, s := range steps {
		for range s.begin {
			a.begin()
		}
		for range s.end {
			a.end()
		}
		if got := a.stalled(at(s.when), limit); got != s.want {
			t.Errorf("at %v (%s): stalled %v, want %v", s.when, s.what, got, s.want)
		}
	}
}
