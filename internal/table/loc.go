package table

import (
	"bytes"
	"encoding/binary"

	"github.com/kvd-project/kvd/internal/revision"
)

// Where a slot word's record lies. An out-of-place word names its record
// by region offset; an inline word names a block of the arena of the
// bucket that holds the word, so the same word means different bytes in
// different buckets, and every writer path that follows a word needs its
// position too. loc is the answer, and the methods below read and change a
// record whichever format it is in.

// loc is a record's place in the region.
type loc struct {
	off    uint64 // from the start of the region
	n      uint64 // the record's length
	inline bool   // tagged format, in bucket's arena
	bucket uint32 // inline: whose arena
}

// resolve is the record that slot word w (not 0) at position pos names.
func (t *Table) resolve(pos, w uint64) loc {
	if !IsInline(w) {
		s := DecodeSlot(w)
		return loc{off: s.Offset, n: s.Len}
	}
	s := DecodeInlineSlot(w)
	b, _ := t.hdr.slotIndex(pos)
	return loc{off: t.arenaBase(b) + s.Offset, n: s.Len, inline: true, bucket: b}
}

// arenaBase is the region offset of bucket b's arena.
func (t *Table) arenaBase(b uint32) uint64 { return t.hdr.BucketOffset(b) + BucketSize }

// arena is bucket b's arena, as a reader's READ of the bucket holds it.
func (t *Table) arena(b uint32) []byte {
	base := t.arenaBase(b)
	return t.mem[base : base+t.arenas.arenaBytes]
}

// bytes is the record's block.
func (t *Table) block(l loc) []byte { return t.mem[l.off : l.off+l.n] }

// stateOf is the record's state (the writer reads its own bytes plainly).
func (t *Table) stateOf(l loc) uint32 {
	if l.inline {
		return uint32(binary.LittleEndian.Uint16(t.mem[l.off+recState:]))
	}
	return binary.LittleEndian.Uint32(t.mem[l.off+recState:])
}

// setState changes the record's state with one atomic store (an inline
// record's keeps its tag).
func (t *Table) setState(l loc, state uint32) {
	if l.inline {
		t.st.setInlineState(t.block(l), state)
		return
	}
	t.st.half(t.mem, l.off+recState, state)
}

// lens is the record's key and value lengths.
func (t *Table) lens(l loc) (kl, vl int) {
	le := binary.LittleEndian
	if l.inline {
		_, kl, vl = inlineHeadOf(format4, t.block(l))
		return kl, vl
	}
	return int(le.Uint16(t.mem[l.off+recKeyLen:])), int(le.Uint32(t.mem[l.off+recValueLen:]))
}

// keyAt is the record's key: a subslice of the region for an out-of-place
// record; for an inline one (its key is spread over words, between tag
// bytes) a copy in scratch owned by the Table, valid until the next keyAt.
func (t *Table) keyAt(l loc) []byte {
	kl, _ := t.lens(l)
	if l.inline {
		t.keyBuf = appendPayload(t.keyBuf[:0], t.block(l), format4.inlineHead(), kl)
		return t.keyBuf
	}
	return t.mem[l.off+recKey : l.off+recKey+uint64(kl)]
}

// keyIs reports whether the record holds key, without copying.
func (t *Table) keyIs(l loc, key []byte) bool {
	kl, _ := t.lens(l)
	if kl != len(key) {
		return false
	}
	if l.inline {
		return equalPayload(t.block(l), format4.inlineHead(), key)
	}
	return bytes.Equal(t.mem[l.off+recKey:l.off+recKey+uint64(kl)], key)
}

// keyOf is the key of the record slot word w at pos names (see keyAt).
func (t *Table) keyOf(pos, w uint64) []byte { return t.keyAt(t.resolve(pos, w)) }

// verifyAt checks the record slot word w at pos names as a reader would,
// except its state, which it returns: the value (appended to dst for an
// inline record, a subslice of the region otherwise) and metadata.
func (t *Table) verifyAt(pos, w uint64, key, dst []byte) (value []byte, meta revision.Meta, state uint32, err error) {
	l := t.resolve(pos, w)
	if l.inline {
		r, err := parseInline(format4, t.arena(l.bucket), key, DecodeInlineSlot(w))
		if err != nil {
			return nil, revision.Meta{}, 0, err
		}
		return r.AppendValue(dst), r.Meta, r.State, nil
	}
	value, meta, err = verifyContent(format4, t.block(l), key, DecodeSlot(w))
	if err != nil {
		return nil, revision.Meta{}, 0, err
	}
	return value, meta, t.stateOf(l), nil
}

// retireLoc puts the (dead) record's block in limbo, stamped now: an
// arena's for Gi, the record area's for G.
func (t *Table) retireLoc(l loc, now int64) {
	if l.inline {
		t.arenas.free(l.bucket, l.off-t.arenaBase(l.bucket), l.n, now)
		return
	}
	t.alloc.retire(l.off, l.n, now)
	t.payload -= l.n
}

// reclaim frees the limbo blocks of both kinds whose grace period has
// passed.
func (t *Table) reclaim() {
	now := t.clock()
	t.alloc.reclaim(now - t.grace)
	t.arenas.reclaim(now)
}
