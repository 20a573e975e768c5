package rdma

import (
	"slices"
	"testing"
)

// Selective signalling: one SEND in every N is signalled (N capped at half
// of each pool), unsignalled ones are retired only by a signalled one at or
// after them, or by a fence posted after them, in posting order.
func TestSendQueueSignalling(t *testing.T) {
	q := newSendQueue(32, 8, 16)
	var signalled []int
	for i := range 40 {
		if q.add(uint16(i%32), false) {
			signalled = append(signalled, i)
		}
	}
	// The first because nothing signalled was outstanding, then every 16th.
	if want := []int{0, 16, 32}; !slices.Equal(signalled, want) {
		t.Fatalf("signalled %v, want %v", signalled, want)
	}
	var freed []uint16
	free := func(e uint16) { freed = append(freed, e) }
	// Nothing is retired before the signalled SEND that covers it.
	if !q.retireThrough(0, free) || len(freed) != 1 {
		t.Fatalf("retired %v through 0, want [0]", freed)
	}
	freed = freed[:0]
	if !q.retireThrough(16, free) || len(freed) != 16 || freed[0] != 1 || freed[15] != 16 {
		t.Fatalf("retired %v through 16, want 1..16", freed)
	}
	if q.pending() != 23 {
		t.Fatalf("pending %d, want 23", q.pending())
	}
	// A fence retires what was posted before it, not after.
	pos := q.fence()
	if q.add(9, false) {
		t.Fatal("signalled the first SEND after a fence, with one signalled outstanding")
	}
	freed = freed[:0]
	q.retireBefore(pos, free)
	if len(freed) != 23 || q.pending() != 1 {
		t.Fatalf("fence retired %d (pending %d), want 23 (1)", len(freed), q.pending())
	}
	if q.retireThrough(31, free) {
		t.Fatal("retired an entry that is not queued")
	}
}

// One message at a time (each SEND completes before the next is posted):
// every SEND is signalled, so nothing waits for a later one.
func TestSendQueuePingPong(t *testing.T) {
	q := newSendQueue(32, 8, 16)
	for i := range 50 {
		e := uint16(i % 32)
		if i%5 == 4 {
			e = uint16(i%8) | sqCtl
		}
		if !q.add(e, false) {
			t.Fatalf("SEND %d, with nothing outstanding, not signalled", i)
		}
		if !q.retireThrough(e, func(uint16) {}) || q.pending() != 0 {
			t.Fatalf("SEND %d not retired by its own completion", i)
		}
	}
}

// Each pool's limit is below its size: a sender that has taken every
// buffer of a pool has a signalled SEND among them, so it gets buffers
// back, even with SENDs of the other pool in between.
func TestSendQueuePools(t *testing.T) {
	for _, every := range []int{1, 4, 16, 1000} {
		q := newSendQueue(32, 8, every)
		for round := range 3 {
			last := -1
			for i := range 8 {
				if q.add(uint16(i)|sqCtl, false) {
					last = i
				}
				if i%3 == 0 && q.add(uint16(i), false) {
					last = i
				}
			}
			if last < 0 {
				t.Fatalf("every %d, round %d: 8 credit messages, none signalled", every, round)
			}
			q.retireBefore(q.tail, func(uint16) {})
		}
		q = newSendQueue(32, 8, every)
		n := 0
		for i := range 32 {
			if q.add(uint16(i), false) {
				n++
			}
		}
		if n == 0 || (every == 1 && n != 32) {
			t.Fatalf("every %d: %d of 32 SENDs signalled", every, n)
		}
	}
	q := newSendQueue(32, 8, 16)
	for i := range 5 {
		if !q.add(uint16(i), true) {
			t.Fatal("an always-signalled SEND was not")
		}
	}
}
