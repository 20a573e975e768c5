package table

import (
	"encoding/binary"
	"time"
)

// Taking a held key out of the region (docs/layout.md, "Placement: Taking
// a key out").
//
// A miss is trusted only if the incomplete flag read clear in both of a
// GET's header reads; but the second round's bucket reads may follow its
// header read (one batch, no order). So a key that moved during round 1
// (absent from both bucket reads there), and whose slot is cleared after
// round 2 read the header, would be missing from every bucket read of the
// GET, with the flag clear in both headers, although the node holds it.
// Rule M4 closes that: a slot of a key the node still holds (an applied
// write that does not fit: Evict; a rebuild: Reset) is cleared only once
// the flag has been set for a full grace period. The flag was clear when
// the GET read its second header, so such a clearing comes more than a
// grace period after that read, later than any GET that is accepted (under
// half of it) can still be reading. Until then the slot stays and names
// the key's record, marked dead at once: no reader accepts it (a dead
// record is a retry, and retries end in an RPC read), and no reader sees
// the key missing.
//
// Such a slot is "pending": it names a dead record, which no other slot
// does (a record turns dead only just before its slot is overwritten or
// cleared, within one call). find still finds its key, so a later Put of
// the key updates the slot in place and a Delete clears it at once (the
// node no longer holds the key then: no miss it proves is false). Moves
// may carry it like any slot; Compact and Withhold leave it alone; Get
// treats it as absent. The flag does not clear while a slot is pending,
// and pending slots are cleared by the table's next write (or Stats) once
// they are due.

// Evict takes key out of the region while the node still holds it (a
// write of the key that the region cannot hold was applied): it flags the
// region incomplete, marks the key's record dead, and clears its slot once
// the flag has been set for the grace period (at once if it already has).
// It reports whether the key had a slot.
func (t *Table) Evict(key []byte) bool {
	if checkKey(key) != nil {
		return false
	}
	t.SetIncomplete(true)
	t.clearPending()
	pos, w, found := t.find(key, Hash(key))
	if !found || t.pending(pos, w) {
		return found
	}
	t.unpublishing(pos, w)
	t.records--
	t.pendingSlots++
	if t.slotsMayClear() {
		t.clearPendingSlot(pos, w)
	}
	return true
}

// slotsMayClear reports whether pending slots may be cleared now: the flag
// has been set for the whole grace period (rule M4).
func (t *Table) slotsMayClear() bool {
	return t.hdr.Incomplete && t.clock()-t.incompleteAt >= t.grace
}

// PendingClearsIn is how long until the slots Evict or Reset keep may be
// cleared (0 if there are none, or they may be now). A rebuild waits this
// long before it places keys, so that they find the slots as a fresh
// region has them (docs/layout.md, "Placement").
func (t *Table) PendingClearsIn() time.Duration {
	if t.pendingSlots == 0 {
		return 0
	}
	return max(time.Duration(t.incompleteAt+t.grace-t.clock()), 0)
}

// clearPending clears every pending slot, if they are due.
func (t *Table) clearPending() {
	if t.pendingSlots == 0 || !t.slotsMayClear() {
		return
	}
	for pos := range t.slotWords() {
		if t.pendingSlots == 0 {
			break
		}
		if w := binary.LittleEndian.Uint64(t.mem[pos:]); w != 0 && t.pending(pos, w) {
			t.clearPendingSlot(pos, w)
		}
	}
}

// clearPendingSlot clears slot pos, pending with word w.
func (t *Table) clearPendingSlot(pos, w uint64) {
	t.checkClearing(pos, w)
	t.pendingSlots--
	t.unpublish(pos, w)
}

// unpublish clears slot pos, whose word w names a record already dead, and
// puts the record in limbo. If writes of its key are in flight (Reserve),
// the slot is held for them, so that they still find room.
func (t *Table) unpublish(pos, w uint64) {
	g := t.group(t.keyOf(pos, w))
	t.st.word(t.mem, pos, 0)
	t.retire(pos, w, t.clock()) // stamped after the store: the grace period starts here
	t.unstamp(pos)
	if g != nil && g.held < 0 {
		b, _ := t.hdr.slotIndex(pos)
		t.hold(g, b)
	}
}

// pending reports whether the record slot word w at pos names is dead:
// its slot is one whose clearing waits (the writer reads its own bytes
// plainly).
func (t *Table) pending(pos, w uint64) bool {
	return t.stateOf(t.resolve(pos, w)) == stateDead
}
