package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/revision"
)

// History keys (revision.go has the layout). Each write is stored once,
// with its value, in a record keyed by its revision: the keys of new
// writes only ever grow, so Pebble flushes them and moves them down the
// levels without rewriting them. The key index (keyindex.go), in memory,
// finds a key's write at or below any revision. Formats 4 to 6 kept a
// small index entry per write in Pebble, keyed by key and revision, which
// the migrations read (migrate.go).
//
// An index entry's user key is escaped so that any bytes order correctly before the revision:
// 0x00 becomes 0x00 0xff and the key ends with 0x00 0x01, which sorts
// below every continuation of the key (a byte above 0x00, or an escaped
// 0x00). So the records of one key are contiguous, the keys are in user
// key order, and esc(k) bounds a range exactly: k' >= k if and only if
// esc(k')+terminator >= esc(k). The revision is stored inverted, so a
// key's newest record comes first and one seek finds the newest at or
// below any revision.

const (
	escByte  = 0x00
	escZero  = 0xff // 0x00 0xff: a 0x00 of the key
	escEnd   = 0x01 // 0x00 0x01: the end of the key
	escAfter = 0x02 // 0x00 0x02: above every record of the key

	histSuffix = 2 + 8 // terminator + be64(^rev)
	orderFixed = 8 + 4 // be64(rev) + be32(seq)
)

// Record flags: the first byte of a by-revision record's value and of
// an index entry.
const (
	histPut       = 0
	histTombstone = 1
)

// histMin is a by-revision record value's least length: flags + Meta.
const histMin = 1 + revision.Size

// indexSize is an index entry's value: flags + be32(seq), the rest of the
// key of the by-revision record that holds the write.
const indexSize = 1 + 4

// appendEscaped appends k escaped, without its terminator.
func appendEscaped(dst, k []byte) []byte {
	for {
		i := bytes.IndexByte(k, escByte)
		if i < 0 {
			return append(dst, k...)
		}
		dst = append(dst, k[:i+1]...)
		dst = append(dst, escZero)
		k = k[i+1:]
	}
}

// unescape appends the key an escaped key (without its terminator)
// stands for to dst; ok is false if esc is not a well-formed escape.
func unescape(dst, esc []byte) ([]byte, bool) {
	for {
		i := bytes.IndexByte(esc, escByte)
		if i < 0 {
			return append(dst, esc...), true
		}
		if i+1 == len(esc) || esc[i+1] != escZero {
			return dst, false
		}
		dst = append(dst, esc[:i+1]...)
		esc = esc[i+2:]
	}
}

// appendHistPrefix appends gen's history prefix and k escaped.
func appendHistPrefix(dst []byte, gen uint64, k []byte) []byte {
	return appendEscaped(appendRevKey(dst, gen, revHistory), k)
}

// appendHistKey appends the key of k's record at rev in gen.
func appendHistKey(dst []byte, gen uint64, k []byte, rev uint64) []byte {
	dst = append(appendHistPrefix(dst, gen, k), escByte, escEnd)
	return binary.BigEndian.AppendUint64(dst, ^rev)
}

// appendOrderKey appends the key of the revision-order record of the
// seq'th write of revision rev, to key k, in gen.
func appendOrderKey(dst []byte, gen, rev uint64, seq uint32, k []byte) []byte {
	dst = binary.BigEndian.AppendUint64(appendRevKey(dst, gen, revOrder), rev)
	dst = binary.BigEndian.AppendUint32(dst, seq)
	return append(dst, k...)
}

// splitHistKey splits a history key (after its kind byte) into the
// escaped user key and the revision; ok is false if it is malformed.
func splitHistKey(k []byte) (esc []byte, rev uint64, ok bool) {
	if len(k) < histSuffix {
		return nil, 0, false
	}
	n := len(k) - histSuffix
	if k[n] != escByte || k[n+1] != escEnd {
		return nil, 0, false
	}
	return k[:n], ^binary.BigEndian.Uint64(k[n+2:]), true
}

// splitOrderKey splits a revision-order key (after its kind byte).
func splitOrderKey(k []byte) (rev uint64, seq uint32, key []byte, ok bool) {
	if len(k) <= orderFixed {
		return 0, 0, nil, false
	}
	return binary.BigEndian.Uint64(k), binary.BigEndian.Uint32(k[8:]), k[orderFixed:], true
}

// appendHistValue appends a by-revision record's value.
func appendHistValue(dst []byte, m revision.Meta, value []byte, deleted bool) []byte {
	if deleted {
		return m.Append(append(dst, histTombstone))
	}
	return append(m.Append(append(dst, histPut)), value...)
}

// decodeHistValue splits a by-revision record's value; value aliases raw.
func decodeHistValue(raw []byte) (m revision.Meta, value []byte, deleted bool, err error) {
	if len(raw) < histMin || raw[0] > histTombstone || (raw[0] == histTombstone && len(raw) != histMin) {
		return revision.Meta{}, nil, false, fmt.Errorf("%w: history record of %d bytes", ErrCorrupt, len(raw))
	}
	m, _ = revision.Decode(raw[1:])
	return m, raw[histMin:], raw[0] == histTombstone, nil
}

// appendIndexValue appends an index entry's value.
func appendIndexValue(dst []byte, seq uint32, deleted bool) []byte {
	flags := byte(histPut)
	if deleted {
		flags = histTombstone
	}
	return binary.BigEndian.AppendUint32(append(dst, flags), seq)
}

// decodeIndexValue splits an index entry's value.
func decodeIndexValue(raw []byte) (seq uint32, deleted bool, err error) {
	if len(raw) != indexSize || raw[0] > histTombstone {
		return 0, false, fmt.Errorf("%w: history index entry of %d bytes", ErrCorrupt, len(raw))
	}
	return binary.BigEndian.Uint32(raw[1:]), raw[0] == histTombstone, nil
}

// RecordHistory records a write of key at revision m.Mod: its value and
// Meta, or (deleted) a tombstone, whose m.Mod is the delete's revision.
// A revision may write several keys (a transaction's, a range delete's)
// and each key at most once; their order is the order of these calls,
// which is the order Changes gives them in; a key written twice in one
// revision has the second write as its state. The write goes in the
// Update's batch, as a record keyed by its revision, and in the key
// index. m.Mod must be above the compaction revision, and at or above
// the key's last write.
func (u *Update) RecordHistory(key, value []byte, m revision.Meta, deleted bool) error {
	r := u.revs()
	switch {
	case len(key) == 0:
		return errors.New("store: history of an empty key")
	case m.Mod == 0 || m.Mod <= r.compact:
		return fmt.Errorf("store: history at revision %d, compacted at %d", m.Mod, r.compact)
	}
	if m.Mod != r.seqRev {
		r.seqRev, r.seq = m.Mod, 0
	}
	seq := r.seq
	u.ixAhead = true
	if err := u.ix.put(key, m, seq, deleted); err != nil {
		return err
	}
	r.seq++
	r.kbuf = appendOrderKey(r.kbuf[:0], u.gen, m.Mod, seq, key)
	r.vbuf = appendHistValue(r.vbuf[:0], m, value, deleted)
	if err := u.orderBatch().Set(r.kbuf, r.vbuf, nil); err != nil {
		return err
	}
	if m.Mod > r.rev {
		// The state is the history at the store revision: a write is
		// in it once its revision is (the state machine's SetRevision
		// names the same one).
		r.rev, r.dirty, r.revUnwritten = m.Mod, true, true
	}
	return nil
}
