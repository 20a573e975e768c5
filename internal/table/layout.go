package table

import (
	"encoding/binary"
	"time"

	"github.com/kvd-project/kvd/internal/limits"
)

// Layout constants, as docs/layout.md states them (layout_test.go checks the
// document against these).
const (
	// Magic is the first 8 bytes of a formatted region.
	Magic = "KVDTABLE"
	// LayoutVersion is the layout this package writes. ParseHeader also
	// reads LayoutVersion3 and LayoutVersion2.
	LayoutVersion = 4
	// LayoutVersion3 is the previous layout, which readers still accept
	// (docs/layout.md): its records carry an 8-byte version where layout
	// 4's carry a revision.Meta, and its header has no revision word.
	LayoutVersion3 = 3
	// LayoutVersion2 is the layout before, which readers still accept
	// (docs/layout.md): layout 3's records, a header of HeaderSize2 bytes
	// and no arenas.
	LayoutVersion2 = 2

	// HeaderSize is the size of the region header, and what a client READs
	// for it: of a layout 2 region it reads the start of bucket 0 as well,
	// which ParseHeader and SameState ignore.
	HeaderSize = 128
	// HeaderSize2 is the size of a layout 2 header.
	HeaderSize2 = 64
	// SlotSize is the size of one slot word.
	SlotSize = 8
	// SlotsPerBucket is how many slots a bucket holds.
	SlotsPerBucket = 8
	// BucketSize is the size of the slot words of one bucket: one cache
	// line, at the start of the bucket. A bucket with an arena is longer
	// (Header.BucketBytes).
	BucketSize = SlotSize * SlotsPerBucket
	// RecordHeaderSize is the fixed part of a record, before the key
	// (layout 4: crc, state, revision.Meta, keyLen, valueLen, reserved).
	RecordHeaderSize = 48
	// RecordAlign is the alignment of records and of their lengths.
	RecordAlign = 8
	// MaxKey is the longest key, in bytes. Keys are at least 1 byte.
	MaxKey = limits.MaxKey
	// MaxValue is the longest value, in bytes.
	MaxValue = limits.MaxValue
	// MinRecord and MaxRecord bound a layout 4 record's padded length.
	MinRecord = (RecordHeaderSize + 1 + RecordAlign - 1) &^ (RecordAlign - 1)
	MaxRecord = (RecordHeaderSize + MaxKey + MaxValue + RecordAlign - 1) &^ (RecordAlign - 1)

	// MaxArea is where the record area must end: slot words hold offset/8
	// in 32 bits. Regions larger than this use only their first MaxArea
	// bytes.
	MaxArea = 1 << 35
	// MaxBuckets bounds the bucket count a header may declare, so that the
	// bucket array leaves room for records below MaxArea.
	MaxBuckets = 1 << 28
)

// The flags field: bit 0 is the incomplete flag, bits 1-15 count its
// changes (mod 2^15), so that a flag that flips and flips back between a
// reader's two header reads still changes the header's bytes.
const (
	// flagIncomplete: the region may be missing keys that the node holds,
	// so a miss read from it is not authoritative.
	flagIncomplete = 1 << 0
	flagEpochShift = 1
)

// Header field offsets within the region.
const (
	offMagic      = 0
	offVersion    = 8
	offSlots      = 12 // u16 slotsPerBucket, then u16 flags: one 4-byte word
	offFlags      = 14
	offBuckets    = 16
	offGrace      = 20
	offRecordBase = 24
	offRecordEnd  = 32
	offLease      = 40
	offLeaderHint = 48
	offGeneration = 56
	// Layouts 3 and 4.
	offBucketBytes = 64
	offInlineGrace = 68
	offInlineMax   = 72
	offReserved    = 76 // to HeaderSize: zero, but for layout 4's revision word
	// Layout 4 only: the applied store revision, an atomic word (Table.SetRevision).
	offRevision     = 80
	inlineArenaUnit = 8 // inline records are 8-aligned in their arena
)

// Header is the decoded region header. Two Headers compare equal with ==
// exactly when they were decoded from identical header bytes (of the
// version's own length), which is what a client checks across the two
// header reads of one GET.
type Header struct {
	Version     uint32 // LayoutVersion, LayoutVersion3 or LayoutVersion2
	Buckets     uint32 // bucket count, a power of two >= 2
	GraceMillis uint32 // the writer leaves dead records untouched this long
	RecordBase  uint64 // offset of the record area
	RecordEnd   uint64 // end of the record area
	// LeaseExpiry is when this node's read lease ends, in nanoseconds of
	// the node's own monotonic clock (internal/monoclock); 0: no lease.
	// It is a fact about time, not a flag the node must clear: a client
	// judges it on its own clock (docs/consistency.md).
	LeaseExpiry uint64
	LeaderHint  uint64 // the node this node believes leads, 0 if none
	Generation  uint64 // changes at every (re)build; never 0
	// Incomplete: the region may lack keys the node holds (a write it could
	// not fit, or a rebuild under way). A hit is still good; a miss is not
	// proof of absence, and a client asks by RPC instead.
	Incomplete bool
	// FlagEpoch counts changes of Incomplete (15 bits, wrapping).
	FlagEpoch uint16
	// BucketBytes is the distance between buckets: BucketSize of slot
	// words, then the bucket's arena. BucketSize means no arenas (always,
	// for layout 2).
	BucketBytes uint32
	// InlineGraceMillis: the writer leaves retired arena bytes untouched
	// this long; 1..GraceMillis (GraceMillis for layout 2).
	InlineGraceMillis uint32
	// InlineMax is the longest inline record, a multiple of 8; 0 iff there
	// are no arenas.
	InlineMax uint32
	// Revision is the node's applied store revision, published after the
	// records of every write up to it are visible, so a reader that read
	// it knows the node's state was at least that far along from then on
	// (docs/layout.md, "The revision word"). 0 before layout 4.
	Revision uint64
}

// Len is the length of h's header in the region: where bucket 0 starts.
func (h Header) Len() uint64 {
	if h.Version == LayoutVersion2 {
		return HeaderSize2
	}
	return HeaderSize
}

// Grace is GraceMillis as a Duration.
func (h Header) Grace() time.Duration {
	return time.Duration(h.GraceMillis) * time.Millisecond
}

// SameState reports whether two raw header reads show the same region
// state: every byte of the header equal except the lease word, which the
// leader advances several times a second and which a reader judges on its
// own, and the revision word, which every applied batch advances (a
// reader that compared it would retry under any write load). Only the
// header's own length counts (taken from a's version field; a different
// version in b differs there): the bytes after a layout 2 header are
// bucket 0's slots, which change without the state changing. Both must be
// HeaderSize bytes long, as a client READs them.
func SameState(a, b []byte) bool {
	if binary.LittleEndian.Uint32(a[offVersion:]) == LayoutVersion2 {
		return string(a[:offLease]) == string(b[:offLease]) &&
			string(a[offLease+8:HeaderSize2]) == string(b[offLease+8:HeaderSize2])
	}
	return string(a[:offLease]) == string(b[:offLease]) &&
		string(a[offLease+8:offRevision]) == string(b[offLease+8:offRevision]) &&
		string(a[offRevision+8:HeaderSize]) == string(b[offRevision+8:HeaderSize])
}

// LeaseOf is the lease expiry of a raw header read (see SameState).
func LeaseOf(b []byte) uint64 { return binary.LittleEndian.Uint64(b[offLease:]) }

// RevisionOf is the revision word of a raw layout 4 header read (see
// SameState; 0 in a layout 3 header, whose reserved bytes hold it).
func RevisionOf(b []byte) uint64 { return binary.LittleEndian.Uint64(b[offRevision:]) }

// SameGeometry reports whether h addresses the region as g does: same
// generation and the same bucket and record-area geometry.
func (h Header) SameGeometry(g Header) bool {
	return h.Generation == g.Generation && h.Version == g.Version && h.Buckets == g.Buckets &&
		h.GraceMillis == g.GraceMillis && h.RecordBase == g.RecordBase && h.RecordEnd == g.RecordEnd &&
		h.BucketBytes == g.BucketBytes && h.InlineGraceMillis == g.InlineGraceMillis && h.InlineMax == g.InlineMax
}

// BucketOffset is the offset of bucket b within the region: its slot words
// are the BucketSize bytes there, its arena (if any) follows them.
func (h Header) BucketOffset(b uint32) uint64 {
	return h.Len() + uint64(b)*uint64(h.BucketBytes)
}

// SlotOffset is the offset of slot s of bucket b.
func (h Header) SlotOffset(b uint32, s int) uint64 {
	return h.BucketOffset(b) + uint64(s)*SlotSize
}

// InArea reports whether s names a record that lies wholly inside the
// record area, so that a client may READ it. Slot words from a torn or
// stale bucket read can name anything; check before reading.
//
// An inline word names a record in its bucket's arena, read with the
// bucket (docs/layout.md, "An inline record"), not READ on its own:
// InArea rejects it.
func (h Header) InArea(s Slot) bool {
	if s.Inline || h.RecordEnd < h.RecordBase {
		return false
	}
	area := h.RecordEnd - h.RecordBase
	return s.Len >= formatOf(h.Version).recordLen(1, 0) && s.Len <= MaxRecord && s.Len <= area &&
		s.Offset >= h.RecordBase && s.Offset-h.RecordBase <= area-s.Len
}

// ParseHeader decodes and validates the header at the start of b (layout
// 4 or 3, or layout 2's shorter one). It checks everything that does not depend
// on the region's length; a client also checks RecordEnd against the length
// its descriptor advertises. It does not allocate.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize2 || string(b[offMagic:offMagic+8]) != Magic {
		return Header{}, ErrBadHeader
	}
	le := binary.LittleEndian
	h := Header{
		Version:     le.Uint32(b[offVersion:]),
		Buckets:     le.Uint32(b[offBuckets:]),
		GraceMillis: le.Uint32(b[offGrace:]),
		RecordBase:  le.Uint64(b[offRecordBase:]),
		RecordEnd:   le.Uint64(b[offRecordEnd:]),
		LeaseExpiry: le.Uint64(b[offLease:]),
		LeaderHint:  le.Uint64(b[offLeaderHint:]),
		Generation:  le.Uint64(b[offGeneration:]),
	}
	switch {
	case h.Version == LayoutVersion2:
		// Layout 2's implied geometry: no arenas, one grace period.
		h.BucketBytes, h.InlineGraceMillis = BucketSize, h.GraceMillis
	case h.Version != LayoutVersion && h.Version != LayoutVersion3:
		return Header{}, ErrLayoutVersion
	case len(b) < HeaderSize || !reservedZero(h.Version, b):
		return Header{}, ErrBadHeader
	default:
		h.BucketBytes = le.Uint32(b[offBucketBytes:])
		h.InlineGraceMillis = le.Uint32(b[offInlineGrace:])
		h.InlineMax = le.Uint32(b[offInlineMax:])
		if h.Version == LayoutVersion {
			h.Revision = le.Uint64(b[offRevision:])
		}
	}
	flags := le.Uint16(b[offFlags:])
	h.Incomplete = flags&flagIncomplete != 0
	h.FlagEpoch = flags >> flagEpochShift
	if le.Uint16(b[offSlots:]) != SlotsPerBucket || !h.validGeometry() {
		return Header{}, ErrBadHeader
	}
	return h, nil
}

// validGeometry checks the decoded fields against each other
// (docs/layout.md, "Header").
func (h Header) validGeometry() bool {
	n := h.Buckets
	return n >= 2 && n <= MaxBuckets && n&(n-1) == 0 &&
		h.GraceMillis != 0 &&
		h.validArenas() &&
		h.RecordBase == h.BucketOffset(n) &&
		h.RecordEnd <= MaxArea && h.RecordEnd%RecordAlign == 0 &&
		h.RecordEnd >= h.RecordBase+formatOf(h.Version).recordLen(1, 0) &&
		h.Generation != 0
}

// validArenas checks the layout 3 fields: buckets a whole number of cache
// lines, an arena no larger than an inline slot word can address (a reader
// sizes its buffers by it: a hostile header must not make it allocate
// gigabytes), an inline limit iff there are arenas, an arena that holds at
// least 8 records of the largest inline size (§6.2 of the design asks for
// about 10), and an inline grace period no longer than the record area's.
func (h Header) validArenas() bool {
	bb, a := h.BucketBytes, h.InlineMax
	return bb >= BucketSize && bb%BucketSize == 0 && uint64(bb-BucketSize) <= MaxArenaBytes &&
		(a == 0) == (bb == BucketSize) &&
		a%inlineArenaUnit == 0 && a <= MaxInline &&
		uint64(bb-BucketSize) >= 8*uint64(a) &&
		h.InlineGraceMillis >= 1 && h.InlineGraceMillis <= h.GraceMillis
}

// reservedZero reports whether a layout 3 or 4 header's reserved bytes
// are zero: layout 3's from offReserved on, layout 4's around the revision
// word.
func reservedZero(layout uint32, b []byte) bool {
	if layout == LayoutVersion3 {
		return zero(b[offReserved:HeaderSize])
	}
	return zero(b[offReserved:offRevision]) && zero(b[offRevision+8:HeaderSize])
}

// zero reports whether every byte of b is 0.
func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// putHeader writes every header field except magic, which the writer stores
// last so that a half-formatted region never parses.
func putHeader(b []byte, h Header) {
	le := binary.LittleEndian
	le.PutUint32(b[offVersion:], h.Version)
	storeHalf(b, offSlots, slotsAndFlags(h.Incomplete, h.FlagEpoch))
	le.PutUint32(b[offBuckets:], h.Buckets)
	le.PutUint32(b[offGrace:], h.GraceMillis)
	le.PutUint64(b[offRecordBase:], h.RecordBase)
	le.PutUint64(b[offRecordEnd:], h.RecordEnd)
	storeWord(b, offLease, h.LeaseExpiry)
	storeWord(b, offLeaderHint, h.LeaderHint)
	storeWord(b, offGeneration, h.Generation)
	if h.Version != LayoutVersion2 {
		le.PutUint32(b[offBucketBytes:], h.BucketBytes)
		le.PutUint32(b[offInlineGrace:], h.InlineGraceMillis)
		le.PutUint32(b[offInlineMax:], h.InlineMax)
		clear(b[offReserved:HeaderSize])
		if h.Version == LayoutVersion {
			storeWord(b, offRevision, h.Revision)
		}
	}
}

// slotsAndFlags is the 4-byte header word at offSlots, stored whole so that
// the flags change atomically.
func slotsAndFlags(incomplete bool, epoch uint16) uint32 {
	f := uint32(epoch) << flagEpochShift & 0xffff
	if incomplete {
		f |= flagIncomplete
	}
	return uint32(SlotsPerBucket) | f<<16
}
