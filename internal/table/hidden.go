package table

// Atomic groups: writes that lock-free readers see all at once, or none of
// (a transaction's writes to several keys). Slot stores are one key at a
// time, so a reader of two keys could otherwise meet one key's new value
// and then, after that, the other key's old one. Records carry the fix: a
// reader accepts a record only if its state is live, so within a group
// the writer keeps every record a reader could take for "before" or
// "after" hidden (state 2, which readers retry on, ErrHidden) until the
// whole group is in place:
//
//  1. BeginAtomic, then Withhold(k) for every key of the group: each key's
//     current record turns hidden, so from here on no reader accepts a
//     value from before the group.
//  2. Puts: each new record is written hidden and published so, so no
//     reader accepts a value from after the group yet.
//  3. Deletes (after the Puts): the slot is cleared as usual. A reader
//     proving a miss now sees the group's "after"; every other key of the
//     group is already hidden in both its forms (old: step 1, new: step
//     2), so no reader can see the "before" of another key after it.
//  4. EndAtomic: every group key's current record turns live.
//
// So a reader's view of a group key is "before" only from reads made
// before step 1 ended for it, and "after" only from reads made in or after
// step 3; any two reads that do not overlap in time therefore agree on
// the order of the group (docs/layout.md, "Atomic groups"). Deletes within
// a group are left to the caller to order after the Puts.

// BeginAtomic opens an atomic group: until EndAtomic, Put writes hidden
// records and Withhold hides keys' current records. The table records the
// group's keys (copies).
func (t *Table) BeginAtomic() {
	t.atomic = true
	t.groupKeys, t.groupEnds = t.groupKeys[:0], t.groupEnds[:0]
}

// Withhold hides key's current record, if it has one, until EndAtomic.
// Call it for every key of the group before the group's first Put.
func (t *Table) Withhold(key []byte) {
	if !t.atomic || checkKey(key) != nil {
		return
	}
	if pos, w, found := t.find(key, Hash(key)); found && !t.pending(pos, w) {
		// (A pending slot's record is dead: hidden, EndAtomic would
		// revive it.)
		t.setState(t.resolve(pos, w), stateHidden) // one atomic store
		t.remember(key)
	}
}

// remember adds key to the group, for EndAtomic.
func (t *Table) remember(key []byte) {
	t.groupKeys = append(t.groupKeys, key...)
	t.groupEnds = append(t.groupEnds, len(t.groupKeys))
}

// inGroup reports whether key is one of the open atomic group's.
func (t *Table) inGroup(key []byte) bool {
	start := 0
	for _, end := range t.groupEnds {
		if string(t.groupKeys[start:end]) == string(key) {
			return true
		}
		start = end
	}
	return false
}

// EndAtomic closes the group: the current record of each of its keys
// (whichever the key's slot names now, if any) turns live. A record the
// group withheld and then retired stays dead.
func (t *Table) EndAtomic() {
	start := 0
	for _, end := range t.groupEnds {
		key := t.groupKeys[start:end]
		start = end
		if pos, w, found := t.find(key, Hash(key)); found {
			// Whichever record the slot names now: a move within the group
			// carried a hidden inline record as a hidden copy. In a
			// rebuild's hiding phase, Reveal does it (reveal.go).
			if l := t.resolve(pos, w); !t.hiding && t.stateOf(l) == stateHidden {
				t.setState(l, stateLive)
			}
		}
	}
	t.atomic = false
	t.groupKeys, t.groupEnds = t.groupKeys[:0], t.groupEnds[:0]
}
