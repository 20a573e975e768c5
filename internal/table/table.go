package table

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math/rand/v2"
	"time"
	"unsafe"
)

// Table is the writer side of a table region.
//
// Concurrency: a Table is not safe for concurrent use. The caller serialises
// every method call (the server's apply loop owns it, or wraps it in a
// mutex). Remote readers need no coordination with it: they see only
// complete records through atomically published slot words, and a record's
// bytes stay untouched for the grace period after it stops being published.
//
// The Table does not own mem: the caller keeps it mapped for the Table's
// life and frees it afterwards.
type Table struct {
	mem   []byte
	hdr   Header
	now   func() time.Time
	epoch time.Time // limbo stamps are durations since epoch (monotonic)
	grace int64     // ns
	alloc allocator
	// arenas allocates the bytes of inline records in each bucket's arena
	// (arena.go); empty without Config.InlineMax.
	arenas arenas
	// st makes every atomic store into mem once the table is formatted
	// (its hook is for tests).
	st stores
	// inlineBuf is writeInline's scratch space, kept between calls.
	inlineBuf []byte

	records int
	payload uint64 // bytes of live records, and of pending slots' dead ones
	keyCap  int    // KeyCapacity

	// Rule M4 (evict.go): incompleteAt is when the incomplete flag was last
	// set; pendingSlots counts slots of keys taken out of the region whose
	// clearing waits until the flag has been set for the grace period.
	incompleteAt int64
	pendingSlots int
	// Rule M3 (complete.go): when a key was last placed while the flag was
	// set; the flag clears only the grace period after it.
	placedIncompleteAt int64

	// Placement (place.go). rebuilding: Reset started a rebuild, which ends
	// when the region is flagged complete again.
	rebuilding bool
	// The rebuild's hiding phase (reveal.go), from Reset to Reveal: Puts
	// leave their records hidden, and moves free the old copies of hidden
	// inline records at once; freedNowAt is the clock of the last such
	// free.
	hiding     bool
	freedNowAt int64
	moves      uint64   // keys moved between their buckets, ever
	visited    []uint32 // per bucket: the last search that reached it
	searchID   uint32   // the current search
	hops       []hop
	movedAt    []int64 // per bucket: move stamps (place.go)
	movedMask  []uint8
	// testMidMove, if set (tests only), runs between the two stores of a
	// move, while the key's word is in both of its buckets.
	testMidMove func()

	// Compaction (compact.go).
	compacted    uint64      // bytes of records moved, ever
	compactAgain int64       // clock: no compaction before (its last one's space is in limbo)
	cells        []uint64    // scratch: live bytes per cell
	held         [][2]uint64 // scratch: free pieces held out of the stretch being emptied

	// Inline records (loc.go, carry.go). spills: small records written
	// out of place because their arena was full, ever. keyBuf, valBuf:
	// scratch for an inline record's key and value (spread over tagged
	// words, they are never one subslice of mem). carries: the blocks a
	// chain of moves copies inline records into. packs: arenas packed
	// in a hiding phase (pack.go), ever.
	spills  uint64
	keyBuf  []byte
	valBuf  []byte
	carries []loc
	packs   uint64

	// Atomic groups (hidden.go): open between BeginAtomic and EndAtomic;
	// the group's keys, end to end, with where each ends.
	atomic    bool
	groupKeys []byte
	groupEnds []int

	// Reservations (reserve.go).
	resv      map[string]*resvKey
	resvPool  []*resvKey
	resvSlots []uint8 // per bucket: slots held for reservations
	heldSlots int
}

// Stats is a snapshot of a table's space.
// BytesUsed + BytesReserved + BytesLimbo + BytesFree == BytesArea.
type Stats struct {
	Keys          int    // live keys
	KeyCapacity   int    // the most keys (with new keys in flight) Reserve admits
	SlotsHeld     int    // slots set aside for new keys in flight (Reserve)
	SlotsPending  int    // slots of evicted keys waiting to be cleared (Evict, Reset)
	BytesArea     uint64 // the record area
	BytesUsed     uint64 // blocks holding live records
	BytesPayload  uint64 // the live records themselves (= BytesUsed: a block is its record's length)
	BytesReserved uint64 // blocks set aside for writes in flight (Reserve)
	BytesLimbo    uint64 // superseded records still within the grace period
	BytesFree     uint64 // ready for new records, in free extents
	LargestFree   uint64 // the largest free extent: no longer record can be written now
	Moves         uint64 // keys moved to their other bucket to make room, ever
	Compacted     uint64 // bytes of records moved by Compact, ever

	// Arenas (Config.InlineMax; all 0 without): their bytes over all
	// buckets, those of inline records (live, hidden, or pending) and those
	// in limbo (superseded within the inline grace period).
	// ArenaUsed + ArenaLimbo <= ArenaBytes; fragmentation per bucket is
	// not shown.
	ArenaBytes uint64
	ArenaUsed  uint64
	ArenaLimbo uint64
	Spills     uint64 // small records written to the record area because their arena was full, ever
	Packs      uint64 // arenas packed in a rebuild because their free bytes were cut up (pack.go), ever
}

// Fill is how close the table is to refusing writes, from 0 to 1: the
// larger of the key fill (keys and new keys in flight over KeyCapacity)
// and the byte fill (live, reserved and limbo bytes over the record area:
// limbo is free again after the grace period, but not before). At 1 a new
// key, or any record, is refused; a large record can be refused somewhat
// earlier while free space is fragmented (LargestFree shows it; Compact
// gathers it).
func (s Stats) Fill() float64 {
	var keys, bytes float64
	if s.KeyCapacity > 0 {
		keys = float64(s.Keys+s.SlotsHeld+s.SlotsPending) / float64(s.KeyCapacity)
	}
	if s.BytesArea > 0 {
		bytes = float64(s.BytesUsed+s.BytesReserved+s.BytesLimbo) / float64(s.BytesArea)
	}
	return min(max(keys, bytes), 1)
}

// Format lays an empty table out in mem: the header with a new random
// generation, and zeroed buckets. The geometry comes from len(mem) and cfg.
// mem must be 8-byte aligned (mmap'd memory is). Format assumes no reader
// holds locations into mem; to empty a table readers may be using, use
// Reset. The lease starts as term 0, not valid.
func Format(mem []byte, cfg Config) (*Table, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(mem) == 0 || uintptr(unsafe.Pointer(&mem[0]))%RecordAlign != 0 {
		return nil, fmt.Errorf("%w: empty or not 8-byte aligned", ErrBadRegion)
	}
	end := min(uint64(len(mem))&^(RecordAlign-1), MaxArea)
	nb := cfg.buckets(end)
	hdr := newHeader(nb, cfg, end)
	base := hdr.RecordBase
	if end < base+MinRecord {
		return nil, fmt.Errorf("%w: %d bytes cannot hold %d buckets and a record", ErrBadRegion, len(mem), nb)
	}
	ar, err := newArenas(nb, uint64(hdr.BucketBytes-BucketSize), int64(cfg.InlineGrace))
	if err != nil {
		return nil, err
	}
	t := &Table{
		mem:    mem,
		hdr:    hdr,
		now:    cfg.Now,
		epoch:  cfg.Now(),
		grace:  int64(cfg.Grace),
		alloc:  newAllocator(base, end),
		arenas: ar,
		// No key placed while flagged incomplete: nothing holds the flag.
		placedIncompleteAt: -int64(cfg.Grace),
		freedNowAt:         -int64(cfg.InlineGrace), // nothing freed at once: nothing delays Reveal
	}
	t.keyCap = KeyCapacity(nb)
	storeWord(mem, offMagic, 0)
	clear(mem[offBucketBytes:base]) // layout 3 and 4's header fields, then the buckets
	putHeader(mem, t.hdr)
	storeWord(mem, offMagic, binary.LittleEndian.Uint64([]byte(Magic)))
	return t, nil
}

// newHeader is the header Format writes: layout 4 (revision 0), with arenas if
// cfg.InlineMax asks for them (cfg has its defaults).
func newHeader(nbuckets uint32, cfg Config, end uint64) Header {
	h := Header{
		Version:           LayoutVersion,
		Buckets:           nbuckets,
		GraceMillis:       uint32(cfg.Grace / time.Millisecond),
		RecordEnd:         end,
		Generation:        newGeneration(0),
		BucketBytes:       cfg.bucketBytes(),
		InlineGraceMillis: uint32(cfg.InlineGrace / time.Millisecond),
		InlineMax:         uint32(cfg.InlineMax),
	}
	h.RecordBase = h.BucketOffset(nbuckets)
	return h
}

// slotWords yields the position of every slot word in the region, bucket
// by bucket: with arenas between them, the slot words are not contiguous.
func (t *Table) slotWords() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for b := range t.hdr.Buckets {
			for s := range SlotsPerBucket {
				if !yield(t.hdr.SlotOffset(b, s)) {
					return
				}
			}
		}
	}
}

// newGeneration returns a random generation, never 0 and never old.
func newGeneration(old uint64) uint64 {
	for {
		if g := rand.Uint64(); g != 0 && g != old {
			return g
		}
	}
}

// Header returns the header as the table last wrote it, with the lease
// word as it is now.
func (t *Table) Header() Header {
	h := t.hdr
	h.LeaseExpiry = loadWord(t.mem, offLease)
	return h
}

// Len is the number of live keys.
func (t *Table) Len() int { return t.records }

// KeyCapacity is the admission bound on keys for a table of nbuckets
// buckets: 15/16 of its slots (docs/layout.md, "Placement"). Reserve
// refuses a new key when the keys plus the new keys in flight reach it.
func KeyCapacity(nbuckets uint32) int {
	slots := int(nbuckets) * SlotsPerBucket
	return slots - slots/16
}

// Stats reports the table's space. It first frees limbo space whose grace
// period has passed, so Limbo is as of now.
func (t *Table) Stats() Stats {
	t.clearPending()
	t.reclaim()
	t.checkSpace()
	return Stats{
		Keys:          t.records,
		KeyCapacity:   t.keyCap,
		SlotsHeld:     t.heldSlots,
		SlotsPending:  t.pendingSlots,
		BytesArea:     t.hdr.RecordEnd - t.hdr.RecordBase,
		BytesUsed:     t.alloc.used,
		BytesPayload:  t.payload,
		BytesReserved: t.alloc.reserved,
		BytesLimbo:    t.alloc.inLimbo,
		BytesFree:     t.alloc.free,
		LargestFree:   t.alloc.largest(),
		Moves:         t.moves,
		Compacted:     t.compacted,
		ArenaBytes:    uint64(t.hdr.Buckets) * t.arenas.arenaBytes,
		ArenaUsed:     t.arenas.live,
		ArenaLimbo:    t.arenas.inLimbo,
		Spills:        t.spills,
		Packs:         t.packs,
	}
}

// LimboClearsIn is how long until every block now in limbo, in the record
// area and in the arenas, is free again (0 if limbo is empty). A rebuild
// that needs the space of what it just unpublished waits this long (Reset).
func (t *Table) LimboClearsIn() time.Duration {
	t.clearPending() // what it clears goes to limbo: count it
	var end int64
	if at, ok := t.alloc.lastRetired(); ok {
		end = at + t.grace
	}
	return max(time.Duration(end-t.clock()), t.ArenaLimboClearsIn())
}

// ArenaLimboClearsIn is how long until every arena block now in limbo is
// free again (0 if none is: always without arenas). A rebuild waits this
// long before it places keys (at most the inline grace period after the
// old contents' slots cleared), so that each arena holds nothing but the
// records of its bucket's keys and every small record fits inline (Reset,
// docs/layout.md "Placement").
func (t *Table) ArenaLimboClearsIn() time.Duration {
	t.clearPending()
	at, ok := t.arenas.lastRetired()
	if !ok {
		return 0
	}
	return max(time.Duration(at+t.arenas.grace-t.clock()), 0)
}

// SetLease publishes the lease expiry (monoclock nanoseconds; 0: none) with
// one atomic store. Unlike every other method it may be called concurrently
// with the others: it touches nothing but its own word, so the lease never
// waits for a writer that holds the table.
func (t *Table) SetLease(expiry uint64) {
	t.st.word(t.mem, offLease, expiry)
}

// SetRevision publishes the node's applied store revision in the header
// with one atomic store. Call it only once the records of every write up
// to rev are visible (their Puts and Deletes returned, an atomic group
// ended), never before: a reader takes a revision it read from the header
// as a lower bound on the state it reads afterwards (docs/layout.md, "The
// revision word"). Reset keeps the word: the state a rebuild puts back is
// never older than it.
func (t *Table) SetRevision(rev uint64) {
	t.hdr.Revision = rev
	t.st.word(t.mem, offRevision, rev)
}

// SetLeaderHint publishes the id of the node this node believes leads (0 if
// none) with one atomic store.
func (t *Table) SetLeaderHint(id uint64) {
	t.hdr.LeaderHint = id
	t.st.word(t.mem, offLeaderHint, id)
}

// SetIncomplete publishes whether the region may be missing keys the node
// holds (see Header.Incomplete), with one atomic store.
// A change also advances the flag epoch, so that a reader whose two header
// reads straddle a flip and a flip back sees different headers.
// The flag stays set while slots of evicted keys wait to be cleared
// (rule M4, evict.go: they clear once it has been set for the grace
// period), and until the grace period has passed since the last key was
// placed while it was set (rule M3, complete.go); a later
// SetIncomplete(false) then clears it (CompleteIn says when).
func (t *Table) SetIncomplete(incomplete bool) {
	if !incomplete {
		t.clearPending()
	}
	if incomplete == t.hdr.Incomplete || !incomplete && !t.mayComplete() {
		return
	}
	if !incomplete {
		t.checkCompleting()
		t.rebuilding = false // a rebuild's keys now move only as everyday ones do
	}
	t.hdr.Incomplete = incomplete
	t.hdr.FlagEpoch = (t.hdr.FlagEpoch + 1) & (1<<(16-flagEpochShift) - 1)
	t.st.half(t.mem, offSlots, slotsAndFlags(incomplete, t.hdr.FlagEpoch))
	if incomplete {
		// Stamped after the store: a reader may have read the flag clear
		// until then, and M4's wait must cover it from there.
		t.incompleteAt = t.clock()
	}
	t.checkHeader()
}

// Reset empties the table for a rebuild while readers may be reading it:
// it flags the region incomplete, marks every record dead and publishes a
// new generation. The node still holds the keys (a rebuild puts them back),
// so their slots are cleared, and the records put in limbo, only once the
// flag has been set for the grace period (rule M4, evict.go; at once if it
// already has): until then a Put of such a key updates its slot in place,
// and PendingClearsIn says how long a rebuild that wants the slots empty
// waits. The records' space becomes reusable a grace period after their
// slots clear, like any other (LimboClearsIn). The lease, leader hint and
// reservations are kept.
//
// Until the region is next flagged complete (SetIncomplete(false)), Puts
// made while it is flagged incomplete place keys as a rebuild does: moving
// keys without a limit on the search or a wait between moves, so that the
// keys of any table that held them fit again, whatever their order
// (place.go).
//
// Reset also starts the hiding phase (reveal.go): until Reveal, every Put
// leaves its record hidden, so no reader accepts anything, and the flag
// stays set. A rebuild waits for the arenas' limbo to drain
// (ArenaLimboClearsIn) before it places keys, then Reveals once RevealIn
// allows. A Reset during a hiding phase (a failed rebuild run again) marks
// the hidden records dead like any others.
func (t *Table) Reset() {
	t.SetIncomplete(true)
	t.rebuilding = true
	t.hiding = true // before the records below turn dead: hidden ones may (checkRetiring)
	t.atomic, t.groupKeys, t.groupEnds = false, t.groupKeys[:0], t.groupEnds[:0]
	for pos := range t.slotWords() {
		if w := binary.LittleEndian.Uint64(t.mem[pos:]); w != 0 && !t.pending(pos, w) {
			t.unpublishing(pos, w)
			t.pendingSlots++
		}
	}
	t.records = 0
	t.hdr.Generation = newGeneration(t.hdr.Generation)
	t.st.word(t.mem, offGeneration, t.hdr.Generation)
	t.clearPending()
	t.checkHeader()
	t.checkSpace()
}

// clock is the writer's monotonic time in ns since Format.
func (t *Table) clock() int64 { return int64(t.now().Sub(t.epoch)) }
