package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Record layout (little-endian), every record starting at a multiple of
// recordAlign within its segment:
//
//	0  crc     uint32  CRC-32C of bytes [4, hdrSize+length)
//	4  length  uint32  payload bytes
//	8  seq     uint64  the segment's sequence number
//	16 batch   uint64  the sync generation the record was written in
//	24 type    uint8
//	25 zero    [7]byte reserved, must be zero
//	32 payload
//	   zero padding up to the next multiple of recordAlign (not checksummed)
const (
	hdrSize     = 32
	recordAlign = 8
	// endSize is the size of an end-of-segment record (no payload).
	endSize = hdrSize
	// segmentReserve is kept free in every segment for its header record
	// (a HardState of three varints and the truncation point) and its end
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
	recEnd                          // no payload: the segment ends here
)

// checksum is the CRC-32C of b (crc32 keeps one shared Castagnoli table,
// so MakeTable costs nothing after its first call).
func checksum(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

func align(n int) int { return (n + recordAlign - 1) &^ (recordAlign - 1) }

// recordSize is the bytes a record with payload bytes of payload takes.
func recordSize(payload int) int { return align(hdrSize + payload) }

// appendRecord appends one record to dst.
func appendRecord(dst []byte, t recType, seq, batch uint64, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recordSize(len(payload)))...)
	r := dst[start:]
	binary.LittleEndian.PutUint32(r[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(r[8:], seq)
	binary.LittleEndian.PutUint64(r[16:], batch)
	r[24] = byte(t)
	copy(r[hdrSize:], payload)
	crc := checksum(r[4 : hdrSize+len(payload)])
	binary.LittleEndian.PutUint32(r, crc)
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
// segment seq. It reads disk, so it trusts nothing: the length is bounded
// by maxPayload and by b before anything is sliced. It returns the
// record's size on disk.
func decodeRecord(b []byte, seq uint64, maxPayload int) (record, int, error) {
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
	for _, z := range b[25:hdrSize] {
		if z != 0 {
			return record{}, 0, errNoRecord
		}
	}
	end := hdrSize + int(n)
	if checksum(b[4:end]) != binary.LittleEndian.Uint32(b) {
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

// appendHeader encodes the payload of a recSegment record: the truncation
// point, the previous segment's sequence number (0 if none was kept), so
// that a missing segment file is noticed, and the marshaled HardState.
func appendHeader(dst []byte, trunc indexTerm, prev uint64, hs []byte) []byte {
	dst = append(dst, indexTermBytes(trunc.index, trunc.term)...)
	dst = binary.LittleEndian.AppendUint64(dst, prev)
	return append(dst, hs...)
}

func parseHeader(p []byte) (trunc indexTerm, prev uint64, hs []byte, err error) {
	if len(p) < 24 {
		return indexTerm{}, 0, nil, fmt.Errorf("%w: short segment header (%d bytes)", ErrCorrupt, len(p))
	}
	trunc.index, trunc.term, _ = parseIndexTerm(p)
	return trunc, binary.LittleEndian.Uint64(p[16:]), p[24:], nil
}
