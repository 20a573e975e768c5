package store

import (
	"fmt"
)

// ForEach calls fn with every record of the checkpoint's history (each
// write, by revision: the key after its generation header and kind
// byte, and the stored value), in revision order: the KV state and its
// past, which a snapshot transfer sends first (Staged.Add).
func (c *Checkpoint) ForEach(fn func(key, raw []byte) error) error {
	return c.scan(appendRevKey(nil, c.gen, revOrder), appendRevKey(nil, c.gen, revOrder+1), revKeyHeader+1, fn)
}

// Add stages one history record as ForEach gave it. A record without the
// shape of one is refused (ErrCorrupt): it comes from the network.
func (st *Staged) Add(key, raw []byte) error {
	if !validOrderRecord(key, raw) {
		return fmt.Errorf("%w: staged history record %x = %x", ErrCorrupt, key, raw)
	}
	return st.set(append(appendRevKey(st.keyBuf[:0], st.gen, revOrder), key...), raw)
}

// ForEachRevision calls fn with the checkpoint's store and compaction
// revisions (the key after its generation header, and the stored value),
// which a snapshot transfer sends after the history and the leases
// (Staged.AddRevision).
func (c *Checkpoint) ForEachRevision(fn func(key, raw []byte) error) error {
	return c.scan(revGenPrefix(c.gen), appendRevKey(nil, c.gen, revOrder), revKeyHeader, fn)
}

// AddRevision stages one revision record as ForEachRevision gave it. A
// record without the shape of one is refused (ErrCorrupt): it comes from
// the network.
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
	}
	return false
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
