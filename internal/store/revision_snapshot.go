package store

import (
	"bytes"
	"fmt"
)

// ForEachRevision calls fn with every record of the checkpoint's revision
// space (the key after its generation header, and the stored value), in
// key order: the store and compaction revisions, the compactor's cursor
// and the history, which a snapshot transfer sends besides the keys and
// the leases (Staged.AddRevision).
func (c *Checkpoint) ForEachRevision(fn func(key, raw []byte) error) error {
	return c.scan(revGenPrefix(c.gen), revGenEnd(c.gen), revKeyHeader, fn)
}

// AddRevision stages one revision-space record as ForEachRevision gave
// it. A record without the shape of one is refused (ErrCorrupt): it comes
// from the network.
func (st *Staged) AddRevision(key, raw []byte) error {
	if !validRevisionRecord(key, raw) {
		return fmt.Errorf("%w: staged revision record %x = %x", ErrCorrupt, key, raw)
	}
	return st.set(append(append(st.keyBuf[:0], revGenPrefix(st.gen)...), key...), raw)
}

// validRevisionRecord reports whether (key, raw), a record after its
// generation header, has the shape of a revision-space record: what the
// readers decode without further checks (RangeAt, Changes, the compactor)
// must decode.
func validRevisionRecord(key, raw []byte) bool {
	if len(key) == 0 {
		return false
	}
	switch body := key[1:]; key[0] {
	case revRevision, revCompact:
		return len(body) == 0 && len(raw) == 8
	case revCursor:
		return len(body) == 0 && validCursor(raw)
	case revOrder:
		return validOrderRecord(body, raw)
	case revHistory:
		return validHistRecord(body, raw)
	}
	return false
}

// validCursor reports whether raw is a compaction cursor whose resume
// point, if it has one, is a history key's.
func validCursor(raw []byte) bool {
	c, ok := decodeCursor(raw)
	if !ok || c.state == cursorDone {
		return ok
	}
	esc, _, ok := splitHistKey(c.resume)
	return ok && len(esc) > 0 && validEscape(esc)
}

// validHistRecord reports whether a history index entry (after its kind
// byte) is well formed: an escaped non-empty key, a revision, and a value
// naming a by-revision record.
func validHistRecord(body, raw []byte) bool {
	esc, rev, ok := splitHistKey(body)
	if !ok || len(esc) == 0 || rev == 0 || !validEscape(esc) {
		return false
	}
	_, _, err := decodeIndexValue(raw)
	return err == nil
}

// validOrderRecord reports whether a by-revision history record (after
// its kind byte) is well formed: a non-empty key, and a value whose Meta
// names the record's revision.
func validOrderRecord(body, raw []byte) bool {
	rev, _, _, ok := splitOrderKey(body)
	if !ok || rev == 0 {
		return false
	}
	m, _, _, err := decodeHistValue(raw)
	return err == nil && m.Mod == rev
}

// validEscape reports whether esc is a well-formed escaped key (without
// its terminator): every 0x00 followed by 0xff.
func validEscape(esc []byte) bool {
	for {
		i := bytes.IndexByte(esc, escByte)
		if i < 0 {
			return true
		}
		if i+1 == len(esc) || esc[i+1] != escZero {
			return false
		}
		esc = esc[i+2:]
	}
}
