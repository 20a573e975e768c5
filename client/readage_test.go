package client

import (
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/table"
)

// TestSlowGetRefusedAtHalfGrace: a one-sided GET is accepted only if it
// took less than half the grace period, by the client's clock, of the
// bytes its answer rests on: the header's grace (here 1s) for a record in
// the record area or a miss, its inline grace (here 200ms) for a record
// in an arena. Bytes are reused a grace period after they retire, and a
// server's clock may run faster than the client's, so a GET that took
// longer may have read bytes reused under it (docs/consistency.md, "The
// read"). The limits come from the header the client read at connect.
//
// The client's clock is the test's (simClock): each READ batch takes
// exactly what the hook says, so a GET that took 0.6 of a grace period
// is refused every time (and the GET asks by RPC), and one that took 0.48
// of it is accepted, whatever the machine's load.
func TestSlowGetRefusedAtHalfGrace(t *testing.T) {
	const (
		grace       = time.Second
		inlineGrace = 200 * time.Millisecond
		R           = defaultReadRetries
	)
	var sim *simClock
	ready := func(t *testing.T) *rig {
		sim = newSimClock(1)
		r := newRigOn(t, table.Config{Grace: grace, InlineMax: inlineMax, InlineGrace: inlineGrace}, sim)
		r.put("k", "v1") // inline
		r.put("big", strings.Repeat("x", 2*inlineMax))
		r.lease(time.Hour)
		r.connect()
		if g := r.node().geo.Load(); g.hdr.GraceMillis != 1000 || g.hdr.InlineGraceMillis != 200 {
			t.Fatalf("header graces %d/%d ms", g.hdr.GraceMillis, g.hdr.InlineGraceMillis)
		}
		n := r.node()
		n.clock.refreshing.Store(true) // no background clock sample: the client samples when it must
		t.Cleanup(func() { n.clock.refreshing.Store(false) })
		return r
	}
	// every makes each READ batch take d of the client's clock.
	every := func(d time.Duration) func(*rig, int, int) {
		return func(_ *rig, _, op int) {
			if op == 0 {
				sim.advance(d)
			}
		}
	}
	big := strings.Repeat("x", 2*inlineMax)
	slow := map[string]uint64{"slow": R}
	runProtoCases(t, []protoCase{
		// A record in the record area, two round trips: 2*240ms, then 2*300ms.
		{name: "record, under half the grace", key: "big", hook: every(240 * time.Millisecond),
			want: big, oneSided: 1, trace: traceHit},
		{name: "record, over half the grace", key: "big", hook: every(300 * time.Millisecond),
			want: rpcMarker, fallbacks: 1, retries: slow, trace: repTrace(R, traceHit...)},
		{name: "record, over half the grace, serializable", level: Serializable, key: "big", hook: every(300 * time.Millisecond),
			want: rpcMarker, fallbacks: 1, retries: slow, trace: repTrace(R, traceHit...)},
		// A miss (no arena bytes in its proof), two round trips.
		{name: "miss, under half the grace", key: "nope", hook: every(240 * time.Millisecond),
			want: answerNotFound, oneSided: 1, trace: traceMiss},
		{name: "miss, over half the grace", key: "nope", hook: every(300 * time.Millisecond),
			want: rpcMarker, fallbacks: 1, retries: slow, trace: repTrace(R, traceMiss...)},
		// An inline record, one round trip: 96ms, then 120ms.
		{name: "inline record, under half the inline grace", hook: every(96 * time.Millisecond),
			want: "v1", oneSided: 1, trace: traceInlineHit},
		{name: "inline record, over half the inline grace", hook: every(120 * time.Millisecond),
			want: rpcMarker, fallbacks: 1, retries: slow, trace: repTrace(R, traceInlineHit...)},
		{name: "inline record, over half the inline grace, serializable", level: Serializable, hook: every(120 * time.Millisecond),
			want: rpcMarker, fallbacks: 1, retries: slow, trace: repTrace(R, traceInlineHit...)},
	}, ready)
}
