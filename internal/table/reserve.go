package table

import "fmt"

// Reservations: admission that concurrent writes cannot overrun.
//
// A server admits a PUT before proposing it, and the write reaches the
// table (Put) only once it is committed, while other admitted writes are
// in flight. Reserve sets aside, when the write is admitted, everything its
// Put will need: a block of the record's exact length (taken from the free
// space, so no later allocation can have it) and, for a key the table does
// not hold, one slot in one of its buckets (found by the same search as a
// Put, moving keys if need be; placements never take a reserved slot).
// Put uses them: a block of the right length from the key's reservations
// and, for a new key, the slot its reservations hold. So a Put that was
// reserved for cannot fail for space, however many writes were admitted
// together.
//
// Reservations are counted per key and record length rather than per
// write, because the writer cannot tell which admitted write a Put is (and
// a batch reports only a key's last write): each Unreserve, called when an
// admitted write is no longer in flight (applied, failed, or given up),
// retires one admission, and frees a block only when the key has more
// blocks of that length left than writes of it in flight. The slot is held
// while any write of the key is in flight and the key is not in the table;
// a Delete of a key with writes in flight turns its freed slot into the
// held one, so that the next Put still has it.
//
// New keys are also bounded by KeyCapacity: keys plus held slots stay
// below 15/16 of all slots (see docs/layout.md, "Placement").

// resvSize counts a key's admitted writes of one record length.
type resvSize struct {
	n       uint64   // record length
	pending int      // admitted writes of this length still in flight
	blocks  []uint64 // reserved blocks not yet filled; len(blocks) <= pending
}

// resvKey is the reservations of one key.
type resvKey struct {
	key     []byte
	pending int   // admitted writes still in flight, over all lengths; > 0
	held    int32 // bucket holding a slot set aside for the key, -1 if none
	sizes   []resvSize
}

// Reserve admits a Put of key with a value of valueLen bytes: it sets aside
// the block and, for a new key, the slot that Put will use, or returns an
// error wrapping ErrNoSpace (or a size error) and changes nothing. Every
// Reserve that returns nil must be followed, once the write is no longer
// in flight (applied or not), by Unreserve(key, valueLen).
func (t *Table) Reserve(key []byte, valueLen int) error {
	if err := checkSizes(key, valueLen); err != nil {
		return err
	}
	t.clearPending()
	h := Hash(key)
	n := RecordLen(len(key), valueLen)
	g := t.group(key)
	_, _, found := t.find(key, h)
	needSlot := !found && (g == nil || g.held < 0)
	p := placement{chain: -1}
	if needSlot {
		if t.records+t.heldSlots+t.pendingSlots >= t.keyCap {
			return fmt.Errorf("%w: %d keys and %d new keys in flight reach the key capacity %d",
				ErrNoSpace, t.records, t.heldSlots, t.keyCap)
		}
		var err error
		if p, err = t.placeNew(h); err != nil {
			return err
		}
	}
	t.alloc.reclaim(t.clock() - t.grace)
	off, ok := t.alloc.allocReserved(n)
	if !ok {
		return t.noBlock(n)
	}
	if g == nil {
		g = t.newGroup(key)
	}
	if needSlot {
		pos, err := t.commit(&p)
		if err != nil {
			t.alloc.unreserve(off, n)
			if g.pending == 0 {
				t.dropGroup(g)
			}
			return err
		}
		b, _ := t.hdr.slotIndex(pos)
		t.hold(g, b)
	}
	g.pending++
	i := g.size(n)
	if i < 0 {
		g.sizes = append(g.sizes, resvSize{n: n, blocks: g.spareBlocks()})
		i = len(g.sizes) - 1
	}
	g.sizes[i].pending++
	g.sizes[i].blocks = append(g.sizes[i].blocks, off)
	t.checkGroup(g)
	return nil
}

// Unreserve ends one admission of a write of key with a value of valueLen
// bytes (see Reserve). It frees what no write still in flight can need.
// Without a matching Reserve it does nothing.
func (t *Table) Unreserve(key []byte, valueLen int) {
	g := t.group(key)
	if g == nil || checkSizes(key, valueLen) != nil {
		return
	}
	n := RecordLen(len(key), valueLen)
	i := g.size(n)
	if i < 0 {
		return
	}
	sz := &g.sizes[i]
	sz.pending--
	for len(sz.blocks) > sz.pending {
		off := sz.blocks[len(sz.blocks)-1]
		sz.blocks = sz.blocks[:len(sz.blocks)-1]
		t.alloc.unreserve(off, n) // never published: no grace period
	}
	g.pending--
	if sz.pending == 0 {
		blocks := sz.blocks[:0]
		last := len(g.sizes) - 1
		g.sizes[i] = g.sizes[last]
		g.sizes[last] = resvSize{blocks: blocks} // keep the slice for reuse
		g.sizes = g.sizes[:last]
	}
	if g.pending == 0 {
		t.dropGroup(g)
		return
	}
	t.checkGroup(g)
}

// placeNew finds a slot for a key of hash h that the table does not hold.
func (t *Table) placeNew(h uint64) (placement, error) {
	b1, b2 := Buckets(h, t.hdr.Buckets)
	if pos, ok := t.emptySlot(b1, b2); ok {
		return placement{pos: pos, chain: -1}, nil
	}
	if j := t.search(b1, b2); j >= 0 {
		return placement{chain: j}, nil
	}
	return placement{}, fmt.Errorf("%w: buckets %d and %d are full", ErrNoSpace, b1, b2)
}

// group returns key's reservations, or nil. It does not allocate.
func (t *Table) group(key []byte) *resvKey {
	if len(t.resv) == 0 {
		return nil
	}
	return t.resv[string(key)]
}

func (t *Table) newGroup(key []byte) *resvKey {
	var g *resvKey
	if k := len(t.resvPool); k > 0 {
		g = t.resvPool[k-1]
		t.resvPool = t.resvPool[:k-1]
	} else {
		g = &resvKey{}
	}
	g.key = append(g.key[:0], key...)
	g.held = -1
	if t.resv == nil {
		t.resv = map[string]*resvKey{}
	}
	t.resv[string(g.key)] = g
	return g
}

func (t *Table) dropGroup(g *resvKey) {
	if g.held >= 0 {
		t.unhold(g)
	}
	delete(t.resv, string(g.key))
	g.pending = 0
	t.resvPool = append(t.resvPool, g)
}

// hold sets a slot of bucket b aside for g's key.
func (t *Table) hold(g *resvKey, b uint32) {
	if t.resvSlots == nil {
		t.resvSlots = make([]uint8, t.hdr.Buckets)
	}
	g.held = int32(b)
	t.resvSlots[b]++
	t.heldSlots++
	t.checkBucket(b)
}

func (t *Table) unhold(g *resvKey) {
	t.resvSlots[g.held]--
	t.heldSlots--
	g.held = -1
}

// takeBlock hands Put a reserved block of n bytes, if the key has one.
func (g *resvKey) takeBlock(n uint64) (uint64, bool) {
	if i := g.size(n); i >= 0 {
		if b := g.sizes[i].blocks; len(b) > 0 {
			g.sizes[i].blocks = b[:len(b)-1]
			return b[len(b)-1], true
		}
	}
	return 0, false
}

func (g *resvKey) size(n uint64) int {
	for i := range g.sizes {
		if g.sizes[i].n == n {
			return i
		}
	}
	return -1
}

// spareBlocks returns an empty blocks slice, reusing one kept in sizes'
// spare capacity.
func (g *resvKey) spareBlocks() []uint64 {
	if len(g.sizes) < cap(g.sizes) {
		return g.sizes[:len(g.sizes)+1][len(g.sizes)].blocks[:0]
	}
	return nil
}
