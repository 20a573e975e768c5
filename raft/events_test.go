package raft

import (
	"fmt"
	"testing"
)

// eventApplier records Apply and Events calls.
type eventApplier struct {
	recordingApplier
	events  []applyCall
	applied []uint64
	resets  int
}

func (e *eventApplier) Events(ws []Write, applied uint64, reset bool) {
	for _, w := range ws {
		e.events = append(e.events, applyCall{w.Version, string(w.Key), string(w.Value), w.Deleted})
	}
	e.applied = append(e.applied, applied)
	if reset {
		e.resets++
	}
}

// TestDeliverEventsUncollapsed: an EventApplier is told every write of the
// batch in log order, repeats of a key included, deletes of absent keys
// left out, after the (collapsed) Apply call; a batch that did not move
// the applied index tells it nothing; a snapshot install is a reset.
func TestDeliverEventsUncollapsed(t *testing.T) {
	rec := &eventApplier{}
	l := &loop{cfg: Config{Applier: rec}, applied: 10}
	l.scratch.eventsAt = 4
	l.scratch.applies = append(l.scratch.applies,
		Write{Version: 5, Key: []byte("a"), Value: []byte("1")},
		Write{Version: 6, Key: []byte("gone"), Deleted: true, absent: true},
		Write{Version: 7, Key: []byte("a"), Value: []byte("2")},
		Write{Version: 8, Key: []byte("a"), Deleted: true},
	)
	l.takeEvents()
	l.deliverApplies()
	l.deliverEvents()
	want := []applyCall{{5, "a", "1", false}, {7, "a", "2", false}, {8, "a", "", true}}
	if fmt.Sprint(rec.events) != fmt.Sprint(want) || fmt.Sprint(rec.applied) != "[10]" {
		t.Fatalf("events %v applied %v, want %v [10]", rec.events, rec.applied, want)
	}
	if len(rec.calls) != 2 { // a collapsed to its delete, gone's delete
		t.Fatalf("Apply calls %v", rec.calls)
	}
	l.takeEvents()
	l.deliverApplies()
	l.deliverEvents() // the applied index did not move
	l.applied, l.scratch.installd = 20, true
	l.takeEvents()
	l.deliverEvents()
	if fmt.Sprint(rec.applied) != "[10 20]" || rec.resets != 1 {
		t.Fatalf("applied %v resets %d, want [10 20] and one reset", rec.applied, rec.resets)
	}
}
