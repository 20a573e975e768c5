package table

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
)

// Record field offsets (docs/layout.md, "Records").
const (
	recCRC      = 0
	recState    = 4
	recVersion  = 8
	recKeyLen   = 16
	recValueLen = 18
	recReserved = 22
	recKey      = RecordHeaderSize

	stateLive   = 0
	stateDead   = 1
	stateHidden = 2 // part of an atomic group being written (hidden.go)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// RecordLen is the padded length of the record holding a key and a value of
// these lengths.
func RecordLen(keyLen, valueLen int) uint64 {
	return (RecordHeaderSize + uint64(keyLen) + uint64(valueLen) + RecordAlign - 1) &^ (RecordAlign - 1)
}

// encodeRecord writes a live record into dst, which must be exactly
// RecordLen(len(key), len(value)) bytes. Lengths must already be in range.
func encodeRecord(dst, key, value []byte, version uint64) {
	encodeRecordState(dst, key, value, version, stateLive)
}

// encodeRecordState is encodeRecord in the given state (the writer writes
// records hidden, and turns them live once published).
func encodeRecordState(dst, key, value []byte, version uint64, state uint32) {
	le := binary.LittleEndian
	le.PutUint32(dst[recState:], state)
	le.PutUint64(dst[recVersion:], version)
	le.PutUint16(dst[recKeyLen:], uint16(len(key)))
	le.PutUint32(dst[recValueLen:], uint32(len(value)))
	le.PutUint16(dst[recReserved:], 0)
	n := recKey + copy(dst[recKey:], key)
	n += copy(dst[n:], value)
	clear(dst[n:])
	le.PutUint32(dst[recCRC:], crc32.Checksum(dst[recVersion:], castagnoli))
}

// VerifyRecord checks record bytes a reader fetched through slot s against
// the key it asked for, and returns the value (a subslice of rec, not a copy)
// and version. The checks run in an order that makes the errors meaningful:
// length (ErrBadLength), checksum (ErrTorn), key (ErrKeyMismatch: the record
// is intact but another key's), state (ErrDead; ErrHidden: part of an
// atomic group still being written). It does not allocate.
//
// Acceptance also needs the conditions of docs/layout.md "Reading" that are
// not in the record: equal headers around the read, and a GET shorter than
// half the grace period.
func VerifyRecord(rec, key []byte, s Slot) (value []byte, version uint64, err error) {
	value, version, err = verifyContent(rec, key, s)
	if err != nil {
		return nil, 0, err
	}
	switch binary.LittleEndian.Uint32(rec[recState:]) {
	case stateLive:
	case stateDead:
		return nil, 0, ErrDead
	case stateHidden:
		return nil, 0, ErrHidden
	default:
		return nil, 0, ErrTorn
	}
	return value, version, nil
}

// verifyContent is VerifyRecord without the state: the record's bytes are
// intact and the key's.
func verifyContent(rec, key []byte, s Slot) (value []byte, version uint64, err error) {
	if uint64(len(rec)) != s.Len || len(rec) < MinRecord || len(rec) > MaxRecord {
		return nil, 0, ErrBadLength
	}
	le := binary.LittleEndian
	kl := int(le.Uint16(rec[recKeyLen:]))
	vl := int(le.Uint32(rec[recValueLen:]))
	if kl == 0 || kl > MaxKey || vl > MaxValue || RecordLen(kl, vl) != s.Len {
		return nil, 0, ErrBadLength
	}
	if crc32.Checksum(rec[recVersion:], castagnoli) != le.Uint32(rec[recCRC:]) ||
		le.Uint16(rec[recReserved:]) != 0 || !zeroPadding(rec[recKey+kl+vl:]) {
		return nil, 0, ErrTorn
	}
	if !bytes.Equal(rec[recKey:recKey+kl], key) {
		return nil, 0, ErrKeyMismatch
	}
	return rec[recKey+kl : recKey+kl+vl : recKey+kl+vl], le.Uint64(rec[recVersion:]), nil
}

// zeroPadding reports whether a record's 0-7 padding bytes are zero, as the
// writer leaves them (the crc alone would let a forged record through).
func zeroPadding(p []byte) bool {
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}
