package mirror

import "github.com/kvd-project/kvd/internal/kv"

// Transactions in the region. A batch holding a transaction that wrote
// several keys (kv.Write.Atomic) is mirrored as one atomic group of the
// table (internal/table/hidden.go, docs/layout.md "Atomic groups"), so
// that a one-sided reader never sees part of it: it sees every key of the
// group as it was before, or as it is after, and two reads that do not
// overlap in time never disagree about which. RPC reads need nothing more:
// they take the table lock, which Apply holds for the whole batch.
//
// The one other way to read ahead of the region is the store (Pebble),
// which RPC reads and repairs consult for keys the region lacks: it runs
// up to one batch ahead (kv.Publisher). For every batch with writes the
// node calls BatchAhead before it commits it, and those reads wait until
// the batch's Apply (Get, repairLocked). Not only a transaction's: the
// writes of one batch are ordered (a compare-and-write may depend on the
// write before it), and a key read from the store ahead of another key's
// earlier write in the region showed a state that never held, to
// GetManyAtomic and to two plain reads in a row.

// BatchAhead is told that the store is about to run ahead of the region by
// one batch. It takes the table lock, so an RPC read already consulting
// the store finishes first, and every later one sees ahead.
func (m *Mirror) BatchAhead() {
	m.tmu.Lock()
	defer m.tmu.Unlock()
	if m.ahead == nil {
		m.ahead = make(chan struct{})
	}
}

// caughtUpLocked ends BatchAhead's wait: the region has applied the
// batch the store was ahead by.
func (m *Mirror) caughtUpLocked() {
	if m.ahead != nil {
		close(m.ahead)
		m.ahead = nil
	}
}

// applyAtomicLocked mirrors a batch as one atomic group: every key's
// record is withheld first, then the PUTs are applied (hidden), then the
// DELETEs, and then the group is revealed. (A PUT the region cannot hold
// becomes a delete and a missing key, as in applyLocked: readers ask for
// it by RPC.)
func (m *Mirror) applyAtomicLocked(ws []kv.Write) {
	m.tbl.BeginAtomic()
	for _, w := range ws {
		m.tbl.Withhold(w.Key)
	}
	m.atomicStep("withheld")
	for _, deletes := range [2]bool{false, true} {
		for _, w := range ws {
			if w.Deleted == deletes {
				m.applyLocked(w.Meta, w.Key, w.Value, w.Deleted)
				m.atomicStep(string(w.Key))
			}
		}
	}
	m.tbl.EndAtomic()
}

// atomicStep runs the test knob, if any, after each step of an atomic
// apply.
func (m *Mirror) atomicStep(step string) {
	if m.cfg.Knobs.AtomicStep != nil {
		m.cfg.Knobs.AtomicStep(step)
	}
}
