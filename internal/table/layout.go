package table

import (
	"encoding/binary"
	"time"
)

// Layout constants, as docs/layout.md states them (layout_test.go checks the
// document against these).
const (
	// Magic is the first 8 bytes of a formatted region.
	Magic = "KVDTABLE"
	// LayoutVersion is the layout this package writes and reads.
	LayoutVersion = 2

	// HeaderSize is the size of the region header.
	HeaderSize = 64
	// SlotSize is the size of one slot word.
	SlotSize = 8
	// SlotsPerBucket is how many slots a bucket holds.
	SlotsPerBucket = 8
	// BucketSize is the size of one bucket: one cache line.
	BucketSize = SlotSize * SlotsPerBucket

	// RecordHeaderSize is the fixed part of a record, before the key.
	RecordHeaderSize = 24
	// RecordAlign is the alignment of records and of their lengths.
	RecordAlign = 8
	// MaxKey is the longest key, in bytes. Keys are at least 1 byte.
	MaxKey = 1024
	// MaxValue is the longest value, in bytes.
	MaxValue = 1 << 20
	// MinRecord and MaxRecord bound a record's padded length.
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
)

// Header is the decoded region header. Two Headers compare equal with ==
// exactly when they were decoded from identical bytes, which is what a client
// checks across the two header reads of one GET.
type Header struct {
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
}

// Grace is GraceMillis as a Duration.
func (h Header) Grace() time.Duration {
	return time.Duration(h.GraceMillis) * time.Millisecond
}

// SameState reports whether two raw header reads show the same region
// state: every byte equal except the lease word, which the leader advances
// several times a second and which a reader judges on its own.
func SameState(a, b []byte) bool {
	return string(a[:offLease]) == string(b[:offLease]) &&
		string(a[offLease+8:HeaderSize]) == string(b[offLease+8:HeaderSize])
}

// LeaseOf is the lease expiry of a raw header read (see SameState).
func LeaseOf(b []byte) uint64 { return binary.LittleEndian.Uint64(b[offLease:]) }

// SameGeometry reports whether h addresses the region as g does: same
// generation and the same bucket and record-area geometry.
func (h Header) SameGeometry(g Header) bool {
	return h.Generation == g.Generation && h.Buckets == g.Buckets && h.GraceMillis == g.GraceMillis &&
		h.RecordBase == g.RecordBase && h.RecordEnd == g.RecordEnd
}

// BucketOffset is the offset of bucket b within the region.
func BucketOffset(b uint32) uint64 {
	return HeaderSize + uint64(b)*BucketSize
}

// InArea reports whether s names a record that lies wholly inside the
// record area, so that a client may READ it. Slot words from a torn or
// stale bucket read can name anything; check before reading.
func (h Header) InArea(s Slot) bool {
	if h.RecordEnd < h.RecordBase {
		return false
	}
	area := h.RecordEnd - h.RecordBase
	return s.Len >= MinRecord && s.Len <= MaxRecord && s.Len <= area &&
		s.Offset >= h.RecordBase && s.Offset-h.RecordBase <= area-s.Len
}

// ParseHeader decodes and validates the first HeaderSize bytes of b. It
// checks everything that does not depend on the region's length; a client
// also checks RecordEnd against the length its descriptor advertises.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize || string(b[offMagic:offMagic+8]) != Magic {
		return Header{}, ErrBadHeader
	}
	le := binary.LittleEndian
	if le.Uint32(b[offVersion:]) != LayoutVersion {
		return Header{}, ErrLayoutVersion
	}
	h := Header{
		Buckets:     le.Uint32(b[offBuckets:]),
		GraceMillis: le.Uint32(b[offGrace:]),
		RecordBase:  le.Uint64(b[offRecordBase:]),
		RecordEnd:   le.Uint64(b[offRecordEnd:]),
		LeaseExpiry: le.Uint64(b[offLease:]),
		LeaderHint:  le.Uint64(b[offLeaderHint:]),
		Generation:  le.Uint64(b[offGeneration:]),
	}
	flags := le.Uint16(b[offFlags:])
	h.Incomplete = flags&flagIncomplete != 0
	h.FlagEpoch = flags >> flagEpochShift
	n := h.Buckets
	switch {
	case le.Uint16(b[offSlots:]) != SlotsPerBucket,
		n < 2 || n > MaxBuckets || n&(n-1) != 0,
		h.GraceMillis == 0,
		h.RecordBase != BucketOffset(n),
		h.RecordEnd > MaxArea || h.RecordEnd%RecordAlign != 0,
		h.RecordEnd < h.RecordBase+MinRecord,
		h.Generation == 0:
		return Header{}, ErrBadHeader
	}
	return h, nil
}

// putHeader writes every header field except magic, which the writer stores
// last so that a half-formatted region never parses.
func putHeader(b []byte, h Header) {
	le := binary.LittleEndian
	le.PutUint32(b[offVersion:], LayoutVersion)
	storeHalf(b, offSlots, slotsAndFlags(h.Incomplete, h.FlagEpoch))
	le.PutUint32(b[offBuckets:], h.Buckets)
	le.PutUint32(b[offGrace:], h.GraceMillis)
	le.PutUint64(b[offRecordBase:], h.RecordBase)
	le.PutUint64(b[offRecordEnd:], h.RecordEnd)
	storeWord(b, offLease, h.LeaseExpiry)
	storeWord(b, offLeaderHint, h.LeaderHint)
	storeWord(b, offGeneration, h.Generation)
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
