package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCoarseTimeout checks the bounds every handed-out context keeps, at
// injected times: it ends no sooner than d and no later than d+d/slack
// after it was asked for, and requests close together share one context.
func TestCoarseTimeout(t *testing.T) {
	const d = time.Hour // far off: only the deadlines are looked at
	parent, cancel := context.WithCancel(context.Background())
	c := newCoarseTimeout(parent, d)
	t0 := time.Now()
	first := c.get(t0)
	for _, step := range []time.Duration{0, time.Second, d / slack / 2, d/slack - time.Nanosecond, d / slack, d/slack + 1, 2 * d / slack, 3 * d} {
		now := t0.Add(step)
		ctx := c.get(now)
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatalf("at +%v: no deadline", step)
		}
		if left := dl.Sub(now); left < d || left > d+d/slack {
			t.Fatalf("at +%v: the context ends %v later, want between %v and %v", step, left, d, d+d/slack)
		}
		if shared := ctx == first; shared != (step <= d/slack) {
			t.Errorf("at +%v: shares the first context: %v", step, shared)
		}
	}
	cancel()
	if err := c.get(t0).Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after the parent ended: %v, want context.Canceled", err)
	}
}
