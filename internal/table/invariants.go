package table

import (
	"bytes"

	"github.com/kvd-project/kvd/internal/invariants"
	"github.com/kvd-project/kvd/internal/revision"
)

// Paired assertions, on in test builds (internal/invariants). Each checks
// on the write side a rule that remote readers rely on when they verify
// what they read (docs/layout.md): a check failing here means a reader
// could have been served something the format promises it never sees.

// checkWritten: a record is complete and verifiable before the word w
// that names it is published at pos (readers verify checksum, key,
// length and value; an inline record's tags too).
func (t *Table) checkWritten(pos, w uint64, key, value []byte, meta revision.Meta) {
	if !invariants.Enabled {
		return
	}
	v, m, state, err := t.verifyAt(pos, w, key, nil)
	invariants.Check(err == nil && m == meta && bytes.Equal(v, value),
		"record of word %#x does not verify before publication: %v", w, err)
	invariants.Check(state == stateHidden,
		"record of word %#x is published in state %d, not hidden (atomic group open: %v)", w, state, t.atomic)
}

// checkRetiring: a record leaving publication is still intact and live
// (or hidden, within an atomic group): nothing wrote over it while readers
// could find it (records are immutable once published, except the state
// word).
func (t *Table) checkRetiring(pos, w uint64) {
	if !invariants.Enabled {
		return
	}
	_, _, st, err := t.verifyAt(pos, w, t.keyOf(pos, w), nil)
	invariants.Check(err == nil, "a published record (word %#x) was modified before it was retired: %v", w, err)
	invariants.Check(st == stateLive || (t.atomic || t.hiding) && st == stateHidden, "retiring a record (word %#x) in state %d", w, st)
}

// checkClearing: rule M4 (evict.go). The slot of a key the node still
// holds is cleared only once the incomplete flag has been set for the
// grace period, and it names the key's record, dead and intact.
func (t *Table) checkClearing(pos, w uint64) {
	if !invariants.Enabled {
		return
	}
	invariants.Check(t.slotsMayClear(), "clearing the slot of an evicted key %d after the flag was set, before the grace period %d",
		t.clock()-t.incompleteAt, t.grace)
	_, _, st, err := t.verifyAt(pos, w, t.keyOf(pos, w), nil)
	invariants.Check(err == nil && st == stateDead, "a pending slot's record (word %#x) is not dead and intact: %v", w, err)
}

// checkCompleting: rules M4 and M3 (evict.go, complete.go). The flag
// clears only with no held key's slot waiting, and a grace period after
// the last key placed while it was set.
func (t *Table) checkCompleting() {
	if !invariants.Enabled {
		return
	}
	since := t.clock() - t.placedIncompleteAt
	invariants.Check(t.pendingSlots == 0, "clearing the incomplete flag with %d slots pending", t.pendingSlots)
	invariants.Check(!t.hiding, "clearing the incomplete flag in a rebuild's hiding phase")
	invariants.Check(since >= t.grace, "clearing the incomplete flag %d ns after a key was placed while it was set, within the grace period %d",
		since, t.grace)
}

// checkHiding: a rebuild's hiding phase (reveal.go). While it lasts, no
// slot names a live record (readers accept nothing, which is what lets
// moves reuse bytes at once); outside it, no slot names a hidden record
// but an open atomic group's.
func (t *Table) checkHiding() {
	if !invariants.Enabled {
		return
	}
	for pos := range t.slotWords() {
		w := loadWord(t.mem, pos)
		if w == 0 {
			continue
		}
		st := t.stateOf(t.resolve(pos, w))
		invariants.Check(!t.hiding || st != stateLive, "slot word %#x names a live record in a rebuild's hiding phase", w)
		invariants.Check(t.hiding || st != stateHidden || t.inGroup(t.keyOf(pos, w)),
			"slot word %#x names a hidden record outside an atomic group, after the hiding phase", w)
	}
}

// checkHeader: the header in memory parses to what the writer believes.
func (t *Table) checkHeader() {
	if !invariants.Enabled {
		return
	}
	h, err := ParseHeader(t.mem)
	invariants.Check(err == nil && h == t.Header(), "header in memory %+v (%v) differs from the writer's %+v", h, err, t.Header())
}

// Checks for placement, moves, reservations and the allocator (place.go,
// reserve.go, alloc.go).

// checkCandidate: a key sits only in one of its two candidate buckets.
func (t *Table) checkCandidate(w uint64, u, b1, b2 uint32) {
	if !invariants.Enabled {
		return
	}
	invariants.Check(u == b1 || u == b2, "slot word %#x in bucket %d, but its key's buckets are %d and %d", w, u, b1, b2)
}

// checkMove: a key about to move may move (outside a rebuild, not within
// the grace period of its last move), and goes to an empty slot.
func (t *Table) checkMove(from uint32, s int, w, dst uint64) {
	if !invariants.Enabled {
		return
	}
	invariants.Check(w != 0 && loadWord(t.mem, dst) == 0, "moving word %#x into a slot at %d that is not empty", w, dst)
	invariants.Check(t.rebuildPlacement() || !t.recentlyMoved(from, s, t.clock()),
		"moving the key in bucket %d slot %d again within the grace period of its last move", from, s)
}

// checkCopied: a moving key's word is published in its new bucket before
// it is cleared from the old one, so a reader always finds it in one.
func (t *Table) checkCopied(dst, w uint64) {
	if !invariants.Enabled {
		return
	}
	invariants.Check(loadWord(t.mem, dst) == w, "moved word %#x not in its new slot at %d before the old one is cleared", w, dst)
}

// checkMoved: after a move the writer (as a reader) finds the key in its
// new slot, and the bucket still has its reserved slots empty.
func (t *Table) checkMoved(w, dst uint64) {
	if !invariants.Enabled {
		return
	}
	key := t.keyOf(dst, w)
	pos, got, ok := t.find(key, Hash(key))
	invariants.Check(ok && pos == dst && got == w, "moved key %q not found at its new slot %d", key, dst)
	b, _ := t.hdr.slotIndex(dst)
	t.checkBucket(b)
}

// checkBucket: bucket b has at least as many empty slots as it holds for
// reservations (no placement took a reserved slot).
func (t *Table) checkBucket(b uint32) {
	if !invariants.Enabled {
		return
	}
	used, _ := t.load(b)
	invariants.Check(SlotsPerBucket-used >= t.reservedIn(b),
		"bucket %d has %d empty slots but holds %d for reservations", b, SlotsPerBucket-used, t.reservedIn(b))
}

// checkGroup: a key's reservations add up: never more blocks than writes
// in flight, and a held slot only for a key the table lacks.
func (t *Table) checkGroup(g *resvKey) {
	if !invariants.Enabled {
		return
	}
	pending := 0
	for _, sz := range g.sizes {
		invariants.Check(sz.pending > 0 && len(sz.blocks) <= sz.pending,
			"key %q: %d blocks reserved for %d writes of %d bytes", g.key, len(sz.blocks), sz.pending, sz.n)
		pending += sz.pending
	}
	invariants.Check(pending == g.pending && pending > 0, "key %q: %d writes in flight, sizes say %d", g.key, g.pending, pending)
	if g.held >= 0 {
		_, _, found := t.find(g.key, Hash(g.key))
		invariants.Check(!found, "key %q holds a slot but is in the table", g.key)
		t.checkBucket(uint32(g.held))
	}
}

// checkSpace: the whole space accounting (run where it is cheap enough:
// Stats and Reset). Free extents are disjoint, in bounds, never adjacent
// (they coalesce), and consistent with their indexes and lists; the byte
// counts add up to the area; reservations add up to their totals; every
// bucket keeps its reserved slots empty.
func (t *Table) checkSpace() {
	if !invariants.Enabled {
		return
	}
	a := &t.alloc
	invariants.Check(a.used+a.reserved+a.inLimbo+a.free == a.end-a.base,
		"bytes used %d + reserved %d + limbo %d + free %d != area %d", a.used, a.reserved, a.inLimbo, a.free, a.end-a.base)
	invariants.Check(t.payload == a.used, "payload %d != used %d", t.payload, a.used)
	var free uint64
	listed := 0
	for i, e := range a.ext {
		if e.n == 0 {
			continue
		}
		free += e.n
		invariants.Check(e.off >= a.base && e.off+e.n <= a.end && e.off%RecordAlign == 0 && e.n%RecordAlign == 0,
			"free extent %d at %d+%d outside the area or unaligned", i, e.off, e.n)
		s, ok1 := a.byStart[e.off/RecordAlign]
		en, ok2 := a.byEnd[(e.off+e.n)/RecordAlign]
		invariants.Check(ok1 && ok2 && s == int32(i) && en == int32(i), "free extent %d at %d+%d not indexed", i, e.off, e.n)
		_, before := a.byEnd[e.off/RecordAlign]
		_, after := a.byStart[(e.off+e.n)/RecordAlign]
		invariants.Check(!before && !after, "free extent %d at %d+%d not merged with a free neighbour", i, e.off, e.n)
		if e.n >= minBlock {
			invariants.Check(int(e.list) == listOf(e.n), "free extent %d of %d bytes on list %d", i, e.n, e.list)
			listed++
		} else {
			invariants.Check(e.list == -1, "free extent %d of %d bytes on a list", i, e.n)
		}
	}
	invariants.Check(free == a.free && len(a.byStart) == len(a.byEnd) && len(a.byStart) == len(a.ext)-len(a.spare),
		"free extents hold %d bytes, counted %d; %d starts, %d ends, %d extents",
		free, a.free, len(a.byStart), len(a.byEnd), len(a.ext)-len(a.spare))
	onLists := 0
	for c := range a.head {
		invariants.Check((a.lists&(1<<c) != 0) == (a.head[c] >= 0), "list %d: bitmap disagrees", c)
		for i := a.head[c]; i >= 0; i = a.ext[i].next {
			invariants.Check(int(a.ext[i].list) == c, "extent %d on list %d says %d", i, c, a.ext[i].list)
			onLists++
		}
	}
	invariants.Check(onLists == listed, "%d extents on lists, %d should be", onLists, listed)
	var limbo uint64
	for _, e := range a.limbo[a.limboHead:] {
		limbo += e.n
	}
	invariants.Check(limbo == a.inLimbo, "limbo holds %d bytes, counted %d", limbo, a.inLimbo)

	var reserved uint64
	held := 0
	for _, g := range t.resv {
		t.checkGroup(g)
		for _, sz := range g.sizes {
			reserved += uint64(len(sz.blocks)) * sz.n
		}
		if g.held >= 0 {
			held++
		}
	}
	invariants.Check(reserved == a.reserved && held == t.heldSlots, "reservations hold %d bytes and %d slots, counted %d and %d",
		reserved, held, a.reserved, t.heldSlots)
	sum := 0
	for b := range t.resvSlots {
		sum += int(t.resvSlots[b])
		t.checkBucket(uint32(b))
	}
	invariants.Check(sum == t.heldSlots, "buckets hold %d slots, counted %d", sum, t.heldSlots)
	t.checkArenas()
	t.checkHiding()
}

// checkCopy: a record compaction moves is an exact, verifiable copy before
// its slot is repointed (readers verify the copy like any record).
func (t *Table) checkCopy(from, to Slot) {
	if !invariants.Enabled {
		return
	}
	key := t.keyAt(loc{off: from.Offset, n: from.Len})
	_, v1, err1 := VerifyRecord(t.mem[from.Offset:from.Offset+from.Len], key, from)
	_, v2, err2 := VerifyRecord(t.mem[to.Offset:to.Offset+to.Len], key, to)
	invariants.Check(err1 == nil && err2 == nil && v1 == v2, "compaction copy of %q does not verify: %v, %v", key, err1, err2)
}

// checkArenas: every inline word names a block inside its own bucket's
// arena whose every word carries the word's tag and which parses as its
// key's record (rule T and the tagged format); a bucket's live inline
// bytes stay within 8·InlineMax (its 8 slots' records: what lets a
// rebuild put every small record inline again, step 5); and the arena
// allocator holds exactly those blocks and its limbo.
func (t *Table) checkArenas() {
	if !invariants.Enabled || t.hdr.InlineMax == 0 {
		return
	}
	var blocks []arenaBlock
	for b := range t.hdr.Buckets {
		var live uint64
		for s := range SlotsPerBucket {
			pos := t.hdr.SlotOffset(b, s)
			w := loadWord(t.mem, pos)
			if w == 0 || !IsInline(w) {
				continue
			}
			is := DecodeInlineSlot(w)
			invariants.Check(is.InArena(t.arenas.arenaBytes) && tagsAre(t.block(t.resolve(pos, w)), is.Tag),
				"inline word %#x in bucket %d names a block outside its arena or not all of tag %d", w, b, is.Tag)
			_, err := parseInline(format4, t.arena(b), t.keyOf(pos, w), is)
			invariants.Check(err == nil, "inline word %#x in bucket %d: its record does not parse: %v", w, b, err)
			live += is.Len
			blocks = append(blocks, arenaBlock{bucket: b, off: is.Offset, n: is.Len})
		}
		invariants.Check(live <= 8*uint64(t.hdr.InlineMax), "bucket %d holds %d live inline bytes, more than 8·%d", b, live, t.hdr.InlineMax)
	}
	err := t.arenas.check(blocks)
	invariants.Check(err == nil, "arena accounting: %v", err)
}
