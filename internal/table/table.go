package table

import (
	"encoding/binary"
	"fmt"
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

	records int
	payload uint64 // bytes of live records
}

// Stats is a snapshot of a table's space.
// BytesUsed + BytesLimbo + BytesFree == BytesArea.
type Stats struct {
	Keys         int    // live keys
	BytesArea    uint64 // the record area
	BytesUsed    uint64 // blocks holding live records
	BytesPayload uint64 // the live records themselves (BytesUsed less class rounding)
	BytesLimbo   uint64 // superseded records still within the grace period
	BytesFree    uint64 // ready for new records: free lists and the untouched tail
}

// Format lays an empty table out in mem: the header with a new random
// generation, and zeroed buckets. The geometry comes from len(mem) and cfg.
// mem must be 8-byte aligned (mmap'd memory is). Format assumes no reader
// holds locations into mem; to empty a table readers may be using, use
// Reset. The lease starts as term 0, not valid.
func Format(mem []byte, cfg Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if len(mem) == 0 || uintptr(unsafe.Pointer(&mem[0]))%RecordAlign != 0 {
		return nil, fmt.Errorf("%w: empty or not 8-byte aligned", ErrBadRegion)
	}
	end := min(uint64(len(mem))&^(RecordAlign-1), MaxArea)
	nb := cfg.buckets(end)
	base := BucketOffset(nb)
	if end < base+MinRecord {
		return nil, fmt.Errorf("%w: %d bytes cannot hold %d buckets and a record", ErrBadRegion, len(mem), nb)
	}
	t := &Table{
		mem: mem,
		hdr: Header{
			Buckets:     nb,
			GraceMillis: uint32(cfg.Grace / time.Millisecond),
			RecordBase:  base,
			RecordEnd:   end,
			Generation:  newGeneration(0),
		},
		now:   cfg.Now,
		epoch: cfg.Now(),
		grace: int64(cfg.Grace),
		alloc: newAllocator(base, end),
	}
	storeWord(mem, offMagic, 0)
	clear(mem[HeaderSize:base])
	putHeader(mem, t.hdr)
	storeWord(mem, offMagic, binary.LittleEndian.Uint64([]byte(Magic)))
	return t, nil
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

// Stats reports the table's space. It first returns limbo space whose grace
// period has passed to the free lists, so Limbo is as of now.
func (t *Table) Stats() Stats {
	t.alloc.reclaim(t.clock() - t.grace)
	return Stats{
		Keys:         t.records,
		BytesArea:    t.hdr.RecordEnd - t.hdr.RecordBase,
		BytesUsed:    t.alloc.used,
		BytesPayload: t.payload,
		BytesLimbo:   t.alloc.inLimbo,
		BytesFree:    t.alloc.freeBytes(),
	}
}

// SetLease publishes the lease expiry (monoclock nanoseconds; 0: none) with
// one atomic store. Unlike every other method it may be called concurrently
// with the others: it touches nothing but its own word, so the lease never
// waits for a writer that holds the table.
func (t *Table) SetLease(expiry uint64) {
	storeWord(t.mem, offLease, expiry)
}

// SetLeaderHint publishes the id of the node this node believes leads (0 if
// none) with one atomic store.
func (t *Table) SetLeaderHint(id uint64) {
	t.hdr.LeaderHint = id
	storeWord(t.mem, offLeaderHint, id)
}

// SetIncomplete publishes whether the region may be missing keys the node
// holds (see Header.Incomplete), with one atomic store.
// A change also advances the flag epoch, so that a reader whose two header
// reads straddle a flip and a flip back sees different headers.
func (t *Table) SetIncomplete(incomplete bool) {
	if incomplete == t.hdr.Incomplete {
		return
	}
	t.hdr.Incomplete = incomplete
	t.hdr.FlagEpoch = (t.hdr.FlagEpoch + 1) & (1<<(16-flagEpochShift) - 1)
	storeHalf(t.mem, offSlots, slotsAndFlags(incomplete, t.hdr.FlagEpoch))
	t.checkHeader()
}

// Reset empties the table for a rebuild while readers may be reading it:
// every record is unpublished, marked dead and put in limbo like a delete,
// then a new generation is published. Its space becomes reusable after the
// grace period, like any other. The lease, leader hint and incomplete flag
// are kept.
func (t *Table) Reset() {
	for pos := uint64(HeaderSize); pos < t.hdr.RecordBase; pos += SlotSize {
		if w := binary.LittleEndian.Uint64(t.mem[pos:]); w != 0 {
			storeWord(t.mem, pos, 0)
			t.retire(w, t.clock()) // stamped after its unpublish: the grace period starts here
		}
	}
	t.records = 0
	t.hdr.Generation = newGeneration(t.hdr.Generation)
	storeWord(t.mem, offGeneration, t.hdr.Generation)
	t.checkHeader()
}

// clock is the writer's monotonic time in ns since Format.
func (t *Table) clock() int64 { return int64(t.now().Sub(t.epoch)) }
