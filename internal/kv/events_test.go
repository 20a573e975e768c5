package kv

import (
	"fmt"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
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
		e.events = append(e.events, applyCall{w.Meta.Mod, string(w.Key), string(w.Value), w.Deleted})
	}
	e.applied = append(e.applied, applied)
	if reset {
		e.resets++
	}
}

// TestPublishEventsUncollapsed: the Publisher is told (Events) every write of the
// batch in log order, repeats of a key included, deletes of absent keys
// left out, after the (collapsed) Apply call; a batch that did not move
// the applied index tells it nothing; a snapshot install is a reset.
func TestPublishEventsUncollapsed(t *testing.T) {
	rec := &eventApplier{}
	m := &machine{pub: rec}
	m.sc.eventsAt = 4
	m.sc.applies = append(m.sc.applies,
		Write{Meta: revision.Meta{Mod: 5}, Key: []byte("a"), Value: []byte("1")},
		Write{Meta: revision.Meta{Mod: 6}, Key: []byte("gone"), Deleted: true, absent: true},
		Write{Meta: revision.Meta{Mod: 7}, Key: []byte("a"), Value: []byte("2")},
		Write{Meta: revision.Meta{Mod: 8}, Key: []byte("a"), Deleted: true},
	)
	m.takeEvents()
	m.publish(0)
	m.publishEvents(10, false)
	want := []applyCall{{5, "a", "1", false}, {7, "a", "2", false}, {8, "a", "", true}}
	if fmt.Sprint(rec.events) != fmt.Sprint(want) || fmt.Sprint(rec.applied) != "[10]" {
		t.Fatalf("events %v applied %v, want %v [10]", rec.events, rec.applied, want)
	}
	if len(rec.calls) != 2 { // a collapsed to its delete, gone's delete
		t.Fatalf("Apply calls %v", rec.calls)
	}
	m.takeEvents()
	m.publish(0)
	m.publishEvents(10, false) // the applied index did not move
	m.takeEvents()
	m.publishEvents(20, true)
	if fmt.Sprint(rec.applied) != "[10 20]" || rec.resets != 1 {
		t.Fatalf("applied %v resets %d, want [10 20] and one reset", rec.applied, rec.resets)
	}
}
