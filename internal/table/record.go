package table

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/kvd-project/kvd/internal/revision"
)

// Record field offsets of layout 4 (docs/layout.md, "Records"); format
// gives those of every layout.
const (
	recCRC      = 0
	recState    = 4
	recMeta     = 8 // the crc covers the record from here on
	recKeyLen   = recMeta + revision.Size
	recValueLen = recKeyLen + 2
	recReserved = recValueLen + 4
	recKey      = RecordHeaderSize

	stateLive   = 0
	stateDead   = 1
	stateHidden = 2 // part of an atomic group being written (hidden.go)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// RecordLen is the padded length of the record holding a key and a value of
// these lengths.
func RecordLen(keyLen, valueLen int) uint64 { return format4.recordLen(keyLen, valueLen) }

// encodeRecord writes a live record into dst, which must be exactly
// RecordLen(len(key), len(value)) bytes. Lengths must already be in range.
func encodeRecord(dst, key, value []byte, meta revision.Meta) {
	encodeRecordState(dst, key, value, meta, stateLive)
}

// encodeRecordState is encodeRecord in the given state (the writer writes
// records hidden, and turns them live once published).
func encodeRecordState(dst, key, value []byte, meta revision.Meta, state uint32) {
	le := binary.LittleEndian
	le.PutUint32(dst[recState:], state)
	meta.Put(dst[recMeta:])
	le.PutUint16(dst[recKeyLen:], uint16(len(key)))
	le.PutUint32(dst[recValueLen:], uint32(len(value)))
	le.PutUint16(dst[recReserved:], 0)
	n := recKey + copy(dst[recKey:], key)
	n += copy(dst[n:], value)
	clear(dst[n:])
	le.PutUint32(dst[recCRC:], crc32.Checksum(dst[recMeta:], castagnoli))
}

// VerifyRecord checks layout 4 record bytes a reader fetched through slot
// s against the key it asked for, and returns the value (a subslice of rec,
// not a copy) and the key's revision metadata. The checks run in an order
// that makes the errors meaningful: length (ErrBadLength), checksum
// (ErrTorn), key (ErrKeyMismatch: the record is intact but another key's),
// state (ErrDead; ErrHidden: part of an atomic group still being written).
// It does not allocate. Header.VerifyRecord reads the record format of the
// header's layout.
//
// Acceptance also needs the conditions of docs/layout.md "Reading" that are
// not in the record (a lease, a GET shorter than half the grace period).
func VerifyRecord(rec, key []byte, s Slot) (value []byte, meta revision.Meta, err error) {
	return verifyRecord(format4, rec, key, s)
}

// VerifyRecord is the package's VerifyRecord for a record of h's layout:
// a layout 2 or 3 record's version is returned as the Meta's Mod.
func (h Header) VerifyRecord(rec, key []byte, s Slot) (value []byte, meta revision.Meta, err error) {
	return verifyRecord(formatOf(h.Version), rec, key, s)
}

func verifyRecord(f format, rec, key []byte, s Slot) (value []byte, meta revision.Meta, err error) {
	value, meta, err = verifyContent(f, rec, key, s)
	if err != nil {
		return nil, revision.Meta{}, err
	}
	if err := stateErr(binary.LittleEndian.Uint32(rec[recState:])); err != nil {
		return nil, revision.Meta{}, err
	}
	return value, meta, nil
}

// verifyContent is VerifyRecord without the state: the record's bytes are
// intact and the key's.
func verifyContent(f format, rec, key []byte, s Slot) (value []byte, meta revision.Meta, err error) {
	if uint64(len(rec)) != s.Len || uint64(len(rec)) < f.recordLen(1, 0) || len(rec) > MaxRecord {
		return nil, revision.Meta{}, ErrBadLength
	}
	le := binary.LittleEndian
	kl := int(le.Uint16(rec[f.keyLenAt():]))
	vl := int(le.Uint32(rec[f.valueLenAt():]))
	if kl == 0 || kl > MaxKey || vl > MaxValue || f.recordLen(kl, vl) != s.Len {
		return nil, revision.Meta{}, ErrBadLength
	}
	k := f.keyAt()
	if crc32.Checksum(rec[recMeta:], castagnoli) != le.Uint32(rec[recCRC:]) ||
		le.Uint16(rec[f.reservedAt():]) != 0 || !zeroPadding(rec[k+kl+vl:]) {
		return nil, revision.Meta{}, ErrTorn
	}
	if !bytes.Equal(rec[k:k+kl], key) {
		return nil, revision.Meta{}, ErrKeyMismatch
	}
	return rec[k+kl : k+kl+vl : k+kl+vl], f.decodeMeta(rec[recMeta:]), nil
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
