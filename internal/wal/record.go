package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Record layout (little-endian), every record starting at a multiple of
// recordAlign within its segment:
//
//	0  crc     uint32  CRC-32C of the segment's first salt (8 bytes,
//	                   little-endian) followed by bytes [4, hdrSize+length);
//	                   of those bytes alone for the segment header and in
//	                   unsalted segments
//	4  length  uint32  payload bytes
//	8  seq     uint64  the segment's sequence number
//	16 batch   uint64  the sync generation the record was written in
//	24 type    uint8
//	25 zero    [3]byte reserved, must be zero
//	28 crc2    uint32  CRC-32C of the segment's second salt followed by
//	                   bytes [4, 28) and [32, hdrSize+length); zero for the
//	                   segment header and in unsalted segments
//	32 payload
//	   zero padding up to the next multiple of recordAlign (not checksummed)
const (
	hdrSize     = 32
	recordAlign = 8
	// endSize is the size of an end-of-segment record (its payload names
	// the next segment: appendEnd).
	endSize    = hdrSize + endPayload
	endPayload = 24
	// segmentReserve is kept free in every segment for its header record
	// (a HardState of three varints, the truncation point, the previous
	// segment, the format marker and the salt's two values) and its end
	// record, so that the end record always fits.
	segmentReserve = 128 + endSize
)

type recType uint8

const (
	recEntry     recType = 1 + iota // payload: marshaled raftpb.Entry
	recHardState                    // payload: marshaled raftpb.HardState
	recCompact                      // payload: index, term: entries <= index dropped
	recReset                        // payload: index, term: log emptied at index
	recSegment                      // payload: truncation index, term, previous segment, HardState
	recEnd                          // payload: the next segment's number and salt (none in older segments)
)

// checksum is the CRC-32C of the bytes seed stands for followed by b
// (crc32 keeps one shared Castagnoli table, so MakeTable costs nothing
// after its first call). Continuing from a seed, rather than hashing a
// copy of salt and record together, keeps the append path free of
// allocations.
func checksum(seed uint32, b []byte) uint32 {
	return crc32.Update(seed, crc32.MakeTable(crc32.Castagnoli), b)
}

// A salt is a segment's secret: two random values its header records,
// with which every other record's two checksums start. Two independent
// 32-bit checksums make a forger guess 64 bits per forged record, since
// replay may examine many forged records (doc.go). unsalted is for the
// header record and for every record of a segment of the format without
// salts: one checksum, from no salt, and crc2 zero.
type salt struct {
	keyed         bool // false: unsalted
	value, value2 uint64
	seed, seed2   uint32 // the CRC-32C of value's and value2's 8 bytes: where checksums start
}

var unsalted = salt{}

func newSalt(v, v2 uint64) salt {
	var b, b2 [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	binary.LittleEndian.PutUint64(b2[:], v2)
	return salt{keyed: true, value: v, value2: v2, seed: checksum(0, b[:]), seed2: checksum(0, b2[:])}
}

// checksum2 is a record's second checksum: over r[4:28] and r[32:end],
// everything but the two checksums.
func (s salt) checksum2(r []byte, end int) uint32 {
	if !s.keyed {
		return 0
	}
	return checksum(checksum(s.seed2, r[4:28]), r[hdrSize:end])
}

func align(n int) int { return (n + recordAlign - 1) &^ (recordAlign - 1) }

// recordSize is the bytes a record with payload bytes of payload takes.
func recordSize(payload int) int { return align(hdrSize + payload) }

// appendRecord appends one record to dst, its checksums starting from
// seed (the segment's salt; unsalted for its header).
func appendRecord(dst []byte, t recType, seq, batch uint64, seed salt, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recordSize(len(payload)))...)
	r := dst[start:]
	binary.LittleEndian.PutUint32(r[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(r[8:], seq)
	binary.LittleEndian.PutUint64(r[16:], batch)
	r[24] = byte(t)
	copy(r[hdrSize:], payload)
	end := hdrSize + len(payload)
	binary.LittleEndian.PutUint32(r[28:], seed.checksum2(r, end))
	binary.LittleEndian.PutUint32(r, checksum(seed.seed, r[4:end]))
	return dst
}

// record is one decoded record; payload aliases the buffer it was read
// from.
type record struct {
	typ     recType
	batch   uint64
	payload []byte
}

// errNoRecord: the bytes at this offset are not a record of this segment
// (zeros, a stale record of the segment's previous use, a torn write, or
// corruption); which one it is, replay decides.
var errNoRecord = fmt.Errorf("%w: no valid record", ErrCorrupt)

// decodeRecord decodes the record at the start of b, which must belong to
// segment seq and carry checksums starting from seed. It reads disk, so
// it trusts nothing: the length is bounded by maxPayload and by b before
// anything is sliced. It returns the record's size on disk.
func decodeRecord(b []byte, seq uint64, seed salt, maxPayload int) (record, int, error) {
	if len(b) < hdrSize {
		return record{}, 0, errNoRecord
	}
	if binary.LittleEndian.Uint64(b[8:]) != seq {
		return record{}, 0, errNoRecord
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if uint64(n) > uint64(maxPayload) || uint64(n) > uint64(len(b)-hdrSize) {
		return record{}, 0, errNoRecord
	}
	if b[25] != 0 || b[26] != 0 || b[27] != 0 {
		return record{}, 0, errNoRecord
	}
	end := hdrSize + int(n)
	if checksum(seed.seed, b[4:end]) != binary.LittleEndian.Uint32(b) ||
		seed.checksum2(b, end) != binary.LittleEndian.Uint32(b[28:]) {
		return record{}, 0, errNoRecord
	}
	t := recType(b[24])
	if t < recEntry || t > recEnd {
		return record{}, 0, errNoRecord
	}
	size := min(align(end), len(b))
	return record{typ: t, batch: binary.LittleEndian.Uint64(b[16:]), payload: b[hdrSize:end]}, size, nil
}

// indexTerm encodes the payload of recCompact and recReset.
func indexTermBytes(index, term uint64) []byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], index)
	binary.LittleEndian.PutUint64(b[8:], term)
	return b[:]
}

func parseIndexTerm(p []byte) (index, term uint64, err error) {
	if len(p) < 16 {
		return 0, 0, fmt.Errorf("%w: short index/term record (%d bytes)", ErrCorrupt, len(p))
	}
	return binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:]), nil
}

// appendEnd appends the end record of segment seq (salted with s) in
// generation batch, naming the segment that follows it and that segment's
// salt. The next segment's header is the one record checked without a
// salt; with the salt known from here, a damaged header of the last
// segment can still be told from one never written (checkSegments).
func appendEnd(dst []byte, seq, batch uint64, s salt, next uint64, nextSalt salt) []byte {
	var p [endPayload]byte
	binary.LittleEndian.PutUint64(p[:], next)
	binary.LittleEndian.PutUint64(p[8:], nextSalt.value)
	binary.LittleEndian.PutUint64(p[16:], nextSalt.value2)
	return appendRecord(dst, recEnd, seq, batch, s, p[:])
}

// parseEnd decodes an end record's payload; ok is false for an end record
// that names no next segment (written before end records did).
func parseEnd(p []byte) (next uint64, nextSalt salt, ok bool) {
	if len(p) != endPayload {
		return 0, salt{}, false
	}
	le := binary.LittleEndian
	return le.Uint64(p), newSalt(le.Uint64(p[8:]), le.Uint64(p[16:])), true
}

// headerSalted, at offset 24 of a segment header's payload, marks a
// salted segment. In the format without salts the HardState's marshaled
// bytes begin there, and they never begin with a tag of field number 0:
// so the two formats cannot be confused, and a build that knows only the
// old one fails to unmarshal the HardState and refuses the segment rather
// than misread it.
const headerSalted = 0x01

// header is a segment header record's payload.
type header struct {
	trunc  indexTerm
	prev   uint64 // the previous segment's sequence number (0 if none was kept)
	salted bool   // false: a segment of the format without salts
	salt   salt
	hs     []byte // the marshaled HardState
}

// appendHeader encodes the payload of a recSegment record: the truncation
// point; the previous segment's sequence number (0 if none was kept), so
// that a missing segment file is noticed; the format marker, 7 zero bytes
// and the segment's two salt values; and the marshaled HardState.
func appendHeader(dst []byte, trunc indexTerm, prev uint64, s salt, hs []byte) []byte {
	dst = append(dst, indexTermBytes(trunc.index, trunc.term)...)
	dst = binary.LittleEndian.AppendUint64(dst, prev)
	dst = binary.LittleEndian.AppendUint64(dst, headerSalted)
	dst = binary.LittleEndian.AppendUint64(dst, s.value)
	dst = binary.LittleEndian.AppendUint64(dst, s.value2)
	return append(dst, hs...)
}

// parseHeader decodes a segment header of either format.
func parseHeader(p []byte) (header, error) {
	if len(p) < 24 {
		return header{}, fmt.Errorf("%w: short segment header (%d bytes)", ErrCorrupt, len(p))
	}
	var h header
	h.trunc.index, h.trunc.term, _ = parseIndexTerm(p)
	h.prev = binary.LittleEndian.Uint64(p[16:])
	if len(p) == 24 || p[24] != headerSalted {
		h.hs = p[24:]
		return h, nil
	}
	if len(p) < 48 || binary.LittleEndian.Uint64(p[24:]) != headerSalted {
		return header{}, fmt.Errorf("%w: bad salted segment header", ErrCorrupt)
	}
	h.salted, h.hs = true, p[48:]
	h.salt = newSalt(binary.LittleEndian.Uint64(p[32:]), binary.LittleEndian.Uint64(p[40:]))
	return h, nil
}
