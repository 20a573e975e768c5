package table

import "time"

// Clearing the incomplete flag (rule M3 of
// docs/layout.md, "Writer rules").
//
// A key placed while the region is flagged incomplete may be one the node
// held all along (a repair, a rebuild): until its store, a reader could
// find it missing. A miss proof that reads the header once, after its
// bucket reads (one batch, no order), would be fooled if both the
// placement and the flag's clearing fell between the bucket reads and the
// header read. So the flag clears only once the grace period has passed
// since the last key was placed while it was set: a GET that missed the
// key before its placement and read the flag clear after the clearing
// then spans more than a grace period, and no GET that long is accepted
// (under half of it).
// Every move made while the flag is set stamps it too (relocate), whoever
// makes it (a Put's placement, a Reserve's room): a rebuild's placement
// lets a key move back without waiting, and two moves can keep it out of
// both of a reader's bucket readings.
// Updating an evicted key's pending slot in place is no placement: the
// slot never left, and its dead record makes readers retry, not miss.

// stampPlacedIncomplete records that a key was placed while the flag was
// set. Taken after the slot store: a reader may miss the key until then,
// so M3's wait counts from there.
func (t *Table) stampPlacedIncomplete() {
	t.placedIncompleteAt = t.clock()
}

// mayComplete reports whether the flag may be cleared now (once due
// pending slots are cleared): no slot of a held key waits (M4), no key
// was placed within the grace period while the flag was set (M3), and a
// rebuild's records are revealed (a hidden key would read as missing to
// the server's own reads, reveal.go).
func (t *Table) mayComplete() bool {
	return t.pendingSlots == 0 && t.clock()-t.placedIncompleteAt >= t.grace && !t.hiding
}

// CompleteIn is how long until SetIncomplete(false) can take effect (0 if
// it can now, or the flag is clear): the later of the pending slots'
// clearing (M4, PendingClearsIn) and the grace period after the last key
// placed while the flag was set (M3). A caller that finds the flag refused
// retries after this long. In a rebuild's hiding phase the flag also waits
// for Reveal, which is the caller's to run (RevealIn).
func (t *Table) CompleteIn() time.Duration {
	if !t.hdr.Incomplete {
		return 0
	}
	m3 := time.Duration(t.placedIncompleteAt + t.grace - t.clock())
	return max(t.PendingClearsIn(), m3, 0)
}
