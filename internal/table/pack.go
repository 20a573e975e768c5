package table

import "slices"

// Packing an arena in the hiding phase (docs/layout.md,
// "Inline records", Rebuild).
//
// The rebuild guarantee (reveal.go) counts bytes: a bucket's live inline
// records take at most 8·a of its 10·a arena. But a rebuild's moves free
// the old copies of the records they carry at once, and the holes they
// leave can cut an arena's free bytes into runs each too short for the
// next record, which then spills to the record area although the arena
// has the bytes (seen in TestRebuildFitsAfterFillDeleteRefill: about one
// fill in 25 spilled a record when restarted in an adversarial order).
// A spilled record costs its GETs a second READ and takes record-area
// bytes a full table may not have, so a restart could fail.
//
// So when a small record finds no run long enough in the hiding phase,
// newBlock packs the arena: it slides the arena's blocks, in offset order,
// to its start, each copied with a fresh tag as a move's copy is
// (carry), its slot word re-stored with the new offset, and the free
// units become one run at the end. Why it is safe: only the bucket's own
// slots name blocks of its arena, and, with no arena limbo, no reservation
// and no open group (each checked: packing is skipped otherwise), every
// taken unit belongs to a block a slot names, so nothing else is moved
// under anyone. Readers accept nothing in this phase, and the bytes the
// slide overwrites held hidden or dead records: it is the same reuse as a
// move's immediate free, so it stamps freedNowAt and Reveal waits Gi after
// it, as reveal.go argues.

// arenaBlock takes a block of n bytes in bucket b's arena, packing the
// arena first if its free bytes suffice but are cut up and packArena's
// conditions hold.
func (t *Table) arenaBlock(b uint32, n uint64) (loc, bool) {
	off, ok := t.arenas.alloc(b, n)
	if !ok && t.packArena(b, n) {
		off, ok = t.arenas.alloc(b, n)
	}
	if !ok {
		return loc{}, false
	}
	return loc{off: t.arenaBase(b) + off, n: n, inline: true, bucket: b}, true
}

// packArena slides bucket b's arena's blocks together and reports whether
// a run of n free bytes exists afterwards. It changes nothing and reports
// false outside the conditions above, or if the arena lacks the bytes.
func (t *Table) packArena(b uint32, n uint64) bool {
	a := &t.arenas
	if !t.hiding || t.atomic || a.inLimbo != 0 || len(t.resv) != 0 ||
		a.arenaBytes-a.takenBytes(b) < n {
		return false
	}
	type named struct {
		pos uint64 // slot word's offset
		l   loc
	}
	var blocks [SlotsPerBucket]named
	k := 0
	var used uint64
	for s := range SlotsPerBucket {
		pos := t.hdr.SlotOffset(b, s)
		if w := loadWord(t.mem, pos); w != 0 && IsInline(w) {
			blocks[k] = named{pos, t.resolve(pos, w)}
			used += blocks[k].l.n
			k++
		}
	}
	if used != a.takenBytes(b) {
		return false // a unit no slot names: not ours to move
	}
	slices.SortFunc(blocks[:k], func(x, y named) int { return int(x.l.off) - int(y.l.off) })
	base := t.arenaBase(b)
	next := base
	for _, nb := range blocks[:k] {
		if nb.l.off != next {
			// A move's copy (carry), within the arena. The two blocks may
			// overlap: the copy only ever goes down (next < off), and
			// copyInline copies word by word upwards, so it reads each
			// source word before anything writes over it.
			dst := loc{off: next, n: nb.l.n, inline: true, bucket: b}
			t.st.word(t.mem, nb.pos, t.carry(nb.pos, loadWord(t.mem, nb.pos), dst))
		}
		next += nb.l.n
	}
	a.repack(b, (next-base)/inlineWord)
	t.freedNowAt = t.clock()
	t.packs++
	t.checkBucket(b)
	return a.arenaBytes-(next-base) >= n
}
