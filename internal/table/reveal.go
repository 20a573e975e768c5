package table

import (
	"fmt"
	"time"
)

// The hiding phase of a rebuild (docs/layout.md,
// "Inline records", Rebuild).
//
// The rebuild guarantee, "a key set a table held once fits again a table
// of the same geometry, in any order", needs every small record inline
// after a rebuild, and so needs each arena to hold only its bucket's
// records while keys are placed: at most 8·a bytes in 10·a, with up to
// 9·a while a chain of moves has taken the blocks of its copies and not
// yet freed the old ones. Limbo breaks that bound: a move's old copy
// would wait Gi in its arena. So between Reset and Reveal (the hiding
// phase) Puts leave their records hidden, and a move frees the old copy
// of a hidden inline record at once (dropCarried), stamping freedNowAt.
//
// Why reusing those bytes at once is safe. Readers accept only live
// records, and a GET that accepted arena bytes took less than Gi/2. No
// record has been live since Reset (it marked every record dead, and
// hidden records stay hidden until Reveal: Put and EndAtomic leave them
// so), so nothing a reader reads in this phase is accepted, whatever the
// bytes under it became. A block freed at once held a hidden record,
// never live, so no reader that began before the phase accepted it
// either. Reveal comes at least Gi after the last immediate free
// (RevealIn), so a GET that accepts a revealed record R (it read R's
// state live, after Reveal) began more than Gi/2 after the last write of
// any earlier occupant of R's block that was freed at once; one freed
// through limbo was last written Gi before R's block was taken. So no
// earlier occupant wrote R's block within the GET, and every word the GET
// read there is either R's or what R's writer saw when it chose R's tag
// (rule T: another tag), as §5.3 argues for any block. After Reveal,
// moves send old copies to limbo again.
//
// Atomic groups stay out of it: Reset drops an open group, EndAtomic
// leaves records hidden while the phase lasts (Reveal turns them live
// with the rest), and Reveal refuses to run inside a group, whose
// records must turn live together.

// Hiding reports whether the table is in a rebuild's hiding phase (from
// Reset to Reveal): its records are hidden, and readers accept none.
func (t *Table) Hiding() bool { return t.hiding }

// RevealIn is how long until Reveal may run: the inline grace period
// after the last block a move freed at once (0 outside the hiding phase,
// or if that is past).
func (t *Table) RevealIn() time.Duration {
	if !t.hiding {
		return 0
	}
	return max(time.Duration(t.freedNowAt+t.arenas.grace-t.clock()), 0)
}

// Reveal ends the hiding phase: every hidden record a slot names turns
// live (one atomic store each, as EndAtomic does for a group), so hits
// work again; Puts from here on are everyday ones. It returns ErrTooEarly,
// changing nothing, before RevealIn is 0 or inside an atomic group. The
// incomplete flag clears later, as always (SetIncomplete, rule M3).
func (t *Table) Reveal() error {
	if !t.hiding {
		return nil
	}
	if d := t.RevealIn(); d > 0 || t.atomic {
		return fmt.Errorf("%w (in %v; atomic group open: %v)", ErrTooEarly, d, t.atomic)
	}
	for pos := range t.slotWords() {
		if w := loadWord(t.mem, pos); w != 0 {
			if l := t.resolve(pos, w); t.stateOf(l) == stateHidden {
				t.setState(l, stateLive)
			}
		}
	}
	t.hiding = false
	t.checkHiding()
	return nil
}

// freeHidden frees, at once, the old copy l of a moved inline record that
// was hidden in the hiding phase (the argument above), and stamps the
// free for RevealIn.
func (t *Table) freeHidden(l loc) {
	t.arenas.freeNow(l.bucket, l.off-t.arenaBase(l.bucket), l.n)
	t.freedNowAt = t.clock()
}
