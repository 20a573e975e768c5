package table

import "encoding/binary"

// Bucket placement (docs/layout.md, "Placement").
//
// A key lives in one slot of its two candidate buckets. A new key takes the
// first empty slot of the less loaded one, counting slots set aside for
// reservations (reserve.go) as loaded and never taking them. When neither
// bucket has a slot to give, the writer looks for a chain of moves that
// frees one, breadth first over buckets: a key in b1 or b2 moves to its
// other bucket, or a key there moves on to its own other bucket, and so on
// until a bucket with a free slot is reached (cuckoo hashing with 8-slot
// buckets). This is an augmenting-path search in the graph of keys and
// buckets, so without a length limit it finds room whenever the keys
// (with the new one) can be placed at all: a set of keys that was once
// placed can always be placed again, in any order. Rebuilds search without
// a limit; everyday writes look at most searchLimit buckets.
//
// Moving a key keeps readers' guarantees (docs/layout.md, "Moving a key"):
//   - its slot word is stored in the new bucket before it is cleared from the
//     old one, so the key is always in at least one of its buckets (a
//     single atomic store each, and the record is not touched);
//   - a key is not moved again until the grace period has passed since it
//     was last moved into its slot (or placed there while the region was
//     flagged incomplete, which readers cannot tell from a move). To fake a
//     miss, a key that is always in one of its buckets must be missing from
//     each bucket when it was read, in both of a GET's rounds: that takes
//     at least two moves of the key, one each way, within the GET, and a
//     GET is accepted only if it took less than half the grace period.
//
// The one exception is a rebuild (after Reset, while the region is flagged
// incomplete): every key in the region was placed during it, no reader
// trusts a miss, and keys move without waiting; they are stamped all the
// same, so that once the region is complete again none of them moves
// within the grace period.

// searchLimit bounds the buckets an everyday placement search looks at
// (the chain of moves it may find is shorter). Below KeyCapacity's load,
// chains are almost always one or two moves long.
const searchLimit = 512

// hop is one bucket of the breadth-first search for a chain of moves.
type hop struct {
	bucket uint32
	from   int32 // the hop whose bucket the key that moves here comes from; -1 for b1 and b2
	slot   uint8 // that key's slot in from's bucket
}

// placement is where a Put publishes its slot word.
type placement struct {
	pos   uint64 // the slot (after the moves, if chain >= 0)
	old   uint64 // the key's current word, if found
	found bool   // an update: pos is the key's own slot
	held  bool   // pos is in the bucket the key's reservation holds a slot in
	chain int    // >= 0: moves (see relocate) free the slot; pos is set by them
}

// place finds the slot a Put of key (hash h) publishes into. It changes
// nothing: a chain of moves, if needed, is carried out by commit.
func (t *Table) place(key []byte, h uint64, g *resvKey) (placement, error) {
	if pos, old, found := t.find(key, h); found {
		return placement{pos: pos, old: old, found: true, chain: -1}, nil
	}
	if g != nil && g.held >= 0 {
		return placement{pos: t.emptyIn(uint32(g.held)), held: true, chain: -1}, nil
	}
	return t.placeNew(h)
}

// commit carries out p's moves, if any, and returns the slot to publish
// into. It fails, changing nothing, only if the moves' inline records find
// no room to be carried to (carries).
func (t *Table) commit(p *placement) (uint64, error) {
	if p.chain >= 0 {
		pos, err := t.relocate(p.chain)
		if err != nil {
			return 0, err
		}
		p.pos = pos
		p.chain = -1
	}
	return p.pos, nil
}

// placeBucket is the bucket whose slot p publishes into: with moves, the
// one (b1 or b2) the chain starts from. Known before the moves, so that a
// Put can choose its record's bytes first.
func (t *Table) placeBucket(p *placement) uint32 {
	if p.chain < 0 {
		b, _ := t.hdr.slotIndex(p.pos)
		return b
	}
	j := p.chain
	for t.hops[j].from >= 0 {
		j = int(t.hops[j].from)
	}
	return t.hops[j].bucket
}

// emptySlot returns the first empty slot of the less loaded of b1 and b2
// (b1 on a tie), counting reserved slots as loaded, or false if neither has
// a slot to give.
func (t *Table) emptySlot(b1, b2 uint32) (uint64, bool) {
	n1, first1 := t.load(b1)
	n2, first2 := t.load(b2)
	n1 += t.reservedIn(b1)
	n2 += t.reservedIn(b2)
	switch {
	case n1 <= n2 && n1 < SlotsPerBucket:
		return first1, true
	case n2 < SlotsPerBucket:
		return first2, true
	}
	return 0, false
}

// load counts bucket b's used slots and finds its first empty one.
func (t *Table) load(b uint32) (used int, firstEmpty uint64) {
	for s := range SlotsPerBucket {
		pos := t.hdr.SlotOffset(b, s)
		if binary.LittleEndian.Uint64(t.mem[pos:]) != 0 {
			used++
		} else if firstEmpty == 0 {
			firstEmpty = pos
		}
	}
	return used, firstEmpty
}

// emptyIn is the first empty slot of bucket b, which must have one.
func (t *Table) emptyIn(b uint32) uint64 {
	_, pos := t.load(b)
	return pos
}

// spare is how many slots of b a new key may take: the empty ones not set
// aside for reservations.
func (t *Table) spare(b uint32) int {
	used, _ := t.load(b)
	return SlotsPerBucket - used - t.reservedIn(b)
}

func (t *Table) reservedIn(b uint32) int {
	if t.resvSlots == nil {
		return 0
	}
	return int(t.resvSlots[b])
}

// rebuildPlacement: keys move without waiting (see the top of this file).
func (t *Table) rebuildPlacement() bool { return t.rebuilding && t.hdr.Incomplete }

// search looks for a chain of moves that gives b1 or b2 a slot. It returns
// the index in t.hops of the chain's last hop (a bucket with a slot to
// give), or -1. It changes nothing in the region.
func (t *Table) search(b1, b2 uint32) int {
	rebuild := t.rebuildPlacement()
	limit := searchLimit
	if rebuild {
		limit = int(t.hdr.Buckets)
	}
	t.ensurePlacementState()
	t.searchID++
	if t.searchID == 0 { // wrapped: forget every old mark
		clear(t.visited)
		t.searchID = 1
	}
	q := append(t.hops[:0], hop{bucket: b1, from: -1}, hop{bucket: b2, from: -1})
	t.visited[b1], t.visited[b2] = t.searchID, t.searchID
	now := t.clock()
	found := -1
search:
	for i := 0; i < len(q) && len(q) < limit; i++ {
		u := q[i].bucket
		for s := range SlotsPerBucket {
			pos := t.hdr.SlotOffset(u, s)
			w := binary.LittleEndian.Uint64(t.mem[pos:])
			if w == 0 || !rebuild && t.recentlyMoved(u, s, now) {
				continue
			}
			v := t.otherBucket(pos, w, u)
			if t.visited[v] == t.searchID || !t.canCarry(pos, w, v) {
				continue
			}
			t.visited[v] = t.searchID
			q = append(q, hop{bucket: v, from: int32(i), slot: uint8(s)})
			if t.spare(v) > 0 {
				found = len(q) - 1
				break search
			}
		}
	}
	t.hops = q
	return found
}

// otherBucket is the candidate bucket, other than u, of the key whose slot
// word in u (at pos) is w.
func (t *Table) otherBucket(pos, w uint64, u uint32) uint32 {
	b1, b2 := Buckets(Hash(t.keyOf(pos, w)), t.hdr.Buckets)
	t.checkCandidate(w, u, b1, b2)
	if u == b1 {
		return b2
	}
	return b1
}

// relocate carries out the chain of moves ending at hop j (found by
// search) and returns the slot it freed in b1 or b2. Each key's word is
// stored into its other bucket before it is cleared from the old one; a
// key whose record is inline carries it along (carry). Every block those
// copies need is taken first, so the chain is carried out whole or, if
// one is missing, not at all.
func (t *Table) relocate(j int) (uint64, error) {
	if err := t.takeCarries(j); err != nil {
		return 0, err
	}
	var src uint64
	for k := 0; t.hops[j].from >= 0; k++ {
		h := t.hops[j]
		from := t.hops[h.from].bucket
		src = t.hdr.SlotOffset(from, int(h.slot))
		w := binary.LittleEndian.Uint64(t.mem[src:])
		dst := t.emptyIn(h.bucket)
		t.checkMove(from, int(h.slot), w, dst)
		nw := w
		if IsInline(w) {
			nw = t.carry(src, w, t.carries[k])
		}
		t.st.word(t.mem, dst, nw)
		t.stampMoved(dst) // after the store: the key's new slot is visible from here
		if t.hdr.Incomplete {
			// Rule M3 for every move while the flag is set, whoever makes
			// it: a rebuild's placement lets keys move back without
			// waiting, and Reserve's moves (admission) stamped nothing, so
			// two of them could hide a key from both of a reader's bucket
			// readings with the flag cleared in between.
			t.stampPlacedIncomplete()
		}
		t.checkCopied(dst, nw) // the word is in both buckets before it leaves the old one
		if t.testMidMove != nil {
			t.testMidMove()
		}
		t.st.word(t.mem, src, 0)
		t.unstamp(src)
		if IsInline(w) {
			t.dropCarried(src, w)
		}
		t.checkMoved(nw, dst)
		t.moves++
		j = int(h.from)
	}
	return src, nil
}

// ensurePlacementState allocates the per-bucket search and move state on
// first use: tables that never move a key never pay for it.
func (t *Table) ensurePlacementState() {
	if t.visited == nil {
		n := int(t.hdr.Buckets)
		t.visited = make([]uint32, n)
		t.movedAt = make([]int64, n)
		t.movedMask = make([]uint8, n)
	}
}

// Move stamps. Per bucket, a time and a mask of the slots whose key was
// moved (or placed while the region was flagged incomplete) at or before
// it, within the grace period before it. A new stamp in a bucket whose last
// one is older than the grace period starts the mask afresh; otherwise it
// adds its slot and moves the time forward, which only delays other moves.

// stampMoved records that the key in slot pos arrived by a move now.
func (t *Table) stampMoved(pos uint64) {
	t.ensurePlacementState()
	b, s := t.hdr.slotIndex(pos)
	now := t.clock()
	if now-t.movedAt[b] >= t.grace {
		t.movedMask[b] = 0
	}
	t.movedMask[b] |= 1 << s
	t.movedAt[b] = now
}

// unstamp forgets slot pos's stamp (its key left, or a new key was placed
// there with the region complete).
func (t *Table) unstamp(pos uint64) {
	if t.movedMask != nil {
		b, s := t.hdr.slotIndex(pos)
		t.movedMask[b] &^= 1 << s
	}
}

// stampPlaced records how a new key arrived in slot pos, after its store:
// while the region is flagged incomplete, a key appearing in a slot looks
// like a move to a reader (the node held the key all along), and holds the
// flag for the grace period (rule M3, complete.go).
func (t *Table) stampPlaced(pos uint64) {
	if t.hdr.Incomplete {
		t.stampMoved(pos)
		t.stampPlacedIncomplete()
	} else {
		t.unstamp(pos)
	}
}

// recentlyMoved reports whether the key in slot s of bucket b may not move
// yet.
func (t *Table) recentlyMoved(b uint32, s int, now int64) bool {
	return t.movedMask[b]&(1<<s) != 0 && now-t.movedAt[b] < t.grace
}

// slotIndex splits a slot position into its bucket and slot number (the
// inverse of SlotOffset).
func (h Header) slotIndex(pos uint64) (uint32, int) {
	i := pos - h.Len()
	return uint32(i / uint64(h.BucketBytes)), int(i % uint64(h.BucketBytes) / SlotSize)
}
