package server

import "github.com/kvd-project/kvd/internal/kv"

// Transactions in the region. A batch holding a transaction that wrote
// several keys (kv.Write.Atomic) is mirrored as one atomic group of the
// table (internal/table/hidden.go, docs/layout.md "Atomic groups"), so
// that a one-sided reader never sees part of it: it sees every key of the
// group as it was before, or as it is after, and two reads that do not
// overlap in time never disagree about which. RPC reads need nothing more:
// they take the table lock, which Apply holds for the whole batch.
//
// The one other way to read ahead of the region is Pebble, which RPC reads
// and repairs consult for keys the region lacks: it runs up to one batch
// ahead (kv.Publisher). For every batch with writes the node calls
// BatchAhead before it commits it, and those reads wait until the batch's
// Apply (read, repairLocked). Not only a transaction's: the writes of one
// batch are ordered (a compare-and-write may depend on the write before
// it), and a key read from Pebble ahead of another key's earlier write in
// the region showed a state that never held, to GetManyAtomic and to two
// plain reads in a row.

// BatchAhead is applier's kv.Publisher.BatchAhead. It takes the table
// lock, so an RPC read already consulting Pebble finishes first, and
// every later one sees ahead.
func (a *applier) BatchAhead() {
	s := (*Server)(a)
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if s.ahead == nil {
		s.ahead = make(chan struct{})
	}
}

// caughtUpLocked ends BatchAhead's wait: the region has applied the
// batch Pebble was ahead by.
func (s *Server) caughtUpLocked() {
	if s.ahead != nil {
		close(s.ahead)
		s.ahead = nil
	}
}

// applyAtomicLocked mirrors a batch as one atomic group: every key's
// record is withheld first, then the PUTs are applied (hidden), then the
// DELETEs, and then the group is revealed. (A PUT the region cannot hold
// becomes a delete and a missing key, as in applyLocked: readers ask for
// it by RPC.)
func (s *Server) applyAtomicLocked(ws []kv.Write) {
	s.tbl.BeginAtomic()
	for _, w := range ws {
		s.tbl.Withhold(w.Key)
	}
	s.testAtomicStep("withheld")
	for _, deletes := range [2]bool{false, true} {
		for _, w := range ws {
			if w.Deleted == deletes {
				s.applyLocked(w.Version, w.Key, w.Value, w.Deleted)
				s.testAtomicStep(string(w.Key))
			}
		}
	}
	s.tbl.EndAtomic()
}

// testAtomicStep runs the test hook, if any, after each step of an atomic
// apply.
func (s *Server) testAtomicStep(step string) {
	if s.testAtomic != nil {
		s.testAtomic(step)
	}
}
