package table

// Inline records (layouts 3 and 4, docs/layout.md, "Inline records") live in
// the arena of the bucket whose slot names them, and a reader fetches them
// in the same READ as that slot. Layout 2's protection, "slot first, record
// in a later round trip", is gone: an RDMA READ is atomic only per aligned
// 8-byte word and reads its words in no promised order, so some words of
// the block may be taken before the record was written, i.e. from the
// block's previous content (an older record whose block was reused after
// its grace period).
//
// So every 8-byte word carries a tag in its top byte, the slot word carries
// the same tag, and the writer picks a tag that no word of the block holds
// at the moment it writes (rule T). This is FaRM's per-cache-line version,
// at the 8-byte atomicity the NIC actually guarantees. The argument (§5.3):
// the slot word W was read inside the GET, so W's record R was complete
// before (rule W) and its block is reused only Gi after R retires, which is
// after the GET ends (the reader gives up after Gi/2). Every word the READ
// took from R's block is therefore R's (tag t) or the content the writer
// inspected when it chose t (tag != t). A reader that accepts only words all
// carrying t accepts only R's bytes, deterministically, whatever order the
// words were read in. Top bytes are written only by the writer, never copied
// from user data, so the image of a record inside some value's bytes
// carries that value's record's tag and cannot pass either. CRC-32C stays as
// defence in depth.
//
// Format: word 0 is crc (4 B) | state (2 B) | 0 | tag; words 1..n-1 carry 7
// payload bytes and the tag. The payload is meta (revision.Meta, 32;
// layout 3: an 8-byte version) | keyLen (2) | valueLen (4) | key | value,
// zero-padded to whole 7-byte groups, and the crc is CRC-32C of the padded
// payload.

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"slices"

	"github.com/kvd-project/kvd/internal/revision"
)

const (
	inlineWord    = 8              // bytes per tagged word
	inlineGroup   = inlineWord - 1 // payload bytes per word
	inlineTagByte = inlineWord - 1 // the tag's byte within a word
	inlineZero    = 6              // word 0's byte that is always zero
	inlineModBits = 23             // bits of Mod (layout 3: the version) an inline slot word keeps
	inlineModMask = 1<<inlineModBits - 1

	// MinInline is the shortest layout 4 inline record (a 1-byte key, no
	// value): format4.inlineLen(1, 0).
	MinInline = inlineWord * (1 + (revision.Size+6+1+inlineGroup-1)/inlineGroup)
	// MaxInline is the longest inline record: 254 words, so that some tag
	// in 1..255 is held by no word of its block (rule T).
	MaxInline = 2032
)

// InlineLen is the length of the layout 4 tagged inline record holding a
// key and a value of these lengths: 8·(1 + ⌈(38+keyLen+valueLen)/7⌉).
func InlineLen(keyLen, valueLen int) uint64 { return format4.inlineLen(keyLen, valueLen) }

// chooseTag is rule T: the smallest tag in 1..255 that no word of block
// holds in its top byte now. block is the writer's own memory (no one else
// stores there), so plain loads see its current content. It returns 0 if
// every tag is taken, which a block of at most MaxInline bytes rules out.
func chooseTag(block []byte) uint8 {
	var held [4]uint64
	held[0] = 1 // tag 0 is never used
	for off := inlineTagByte; off < len(block); off += inlineWord {
		t := block[off]
		held[t/64] |= 1 << (t % 64)
	}
	for i, h := range held {
		if h != ^uint64(0) {
			return uint8(i*64 + bits.TrailingZeros64(^h))
		}
	}
	return 0
}

// writeInline writes the record for key, value and meta into block (of
// exactly InlineLen bytes, 8-aligned) in the given state, under a tag
// chosen by rule T, and returns the tag for the slot word. buf is scratch
// space, returned (grown if it had to be) for the next call.
func (s stores) writeInline(block, buf, key, value []byte, meta revision.Meta, state uint32) (uint8, []byte) {
	tag := chooseTag(block)
	return tag, s.encodeInline(block, buf, key, value, meta, state, tag)
}

// encodeInline writes the record word by word with single aligned 8-byte
// atomic stores (NICs read the block concurrently; copy's wide stores
// promise less), word 0 last. Nothing reads the block as a record before
// its slot word is stored, so the order only matters for the crc. Lengths
// must already be in range and block exactly InlineLen(len(key),
// len(value)) bytes.
//
// The padded payload is first laid out contiguously in buf (a heap slice,
// so crc32 takes it whole without making a stack copy escape): the words
// are then 8-byte loads from it with the top byte replaced by the tag, and
// the crc is one call over it, the same bytes a reader gathers from the
// words. buf is returned for reuse.
func (s stores) encodeInline(block, buf, key, value []byte, meta revision.Meta, state uint32, tag uint8) []byte {
	words := len(block)/inlineWord - 1
	n := words * inlineGroup
	buf = slices.Grow(buf[:0], n+1)[:n+1] // +1: the last word's load reads a byte past the payload
	le := binary.LittleEndian
	meta.Put(buf)
	le.PutUint16(buf[revision.Size:], uint16(len(key)))
	le.PutUint32(buf[revision.Size+2:], uint32(len(value)))
	i := revision.Size + 6
	i += copy(buf[i:], key)
	i += copy(buf[i:], value)
	clear(buf[i:])
	const payloadMask = 1<<(8*inlineGroup) - 1
	for w := range words {
		word := le.Uint64(buf[w*inlineGroup:])&payloadMask | uint64(tag)<<(8*inlineTagByte)
		s.word(block, uint64(inlineWord*(w+1)), word)
	}
	s.word(block, 0, inlineWord0(crc32.Update(0, castagnoli, buf[:n]), state, tag))
	return buf
}

// copyInline copies the record in src into dst (a free block of the same
// length, in this or another arena) under a new tag chosen by rule T for
// dst, and returns the tag: a move's or re-inline's copy (§5.6, §5.8), same
// content, metadata and state. The crc covers the payload, not the tags, so
// the words are copied as they are with only their top byte changed.
func (s stores) copyInline(dst, src []byte) uint8 {
	tag := chooseTag(dst)
	le := binary.LittleEndian
	for off := 0; off < len(src); off += inlineWord {
		w := le.Uint64(src[off:])&(1<<56-1) | uint64(tag)<<56
		s.word(dst, uint64(off), w)
	}
	return tag
}

func inlineWord0(crc, state uint32, tag uint8) uint64 {
	return uint64(crc) | uint64(inlineStateWord(state, tag))<<32
}

// inlineStateWord is bytes 4-7 of word 0: state, zero, tag.
func inlineStateWord(state uint32, tag uint8) uint32 {
	return state&0xffff | uint32(tag)<<24
}

// setInlineState changes a record's state with one atomic 4-byte store of
// bytes 4-7 of word 0, keeping its tag: a reader sees the old state or the
// new one, always under the record's own tag.
func (s stores) setInlineState(block []byte, state uint32) {
	s.half(block, recState, inlineStateWord(state, block[inlineTagByte]))
}

// InlineRecord is a record that parseInline found intact: its fields, and
// the block its value is spread over (7 bytes per word, so it is not one
// subslice; AppendValue gathers it).
type InlineRecord struct {
	Meta   revision.Meta // layout 3: Meta{Mod: version}
	State  uint32
	block  []byte
	head   int // the payload's fixed part (format.inlineHead)
	keyLen int
	valLen int
}

// ValueLen is the length of the record's value.
func (r InlineRecord) ValueLen() int { return r.valLen }

// AppendValue appends the record's value to dst. It allocates only if dst
// lacks the capacity, and then once (the value comes 7 bytes at a time).
func (r InlineRecord) AppendValue(dst []byte) []byte {
	return appendPayload(slices.Grow(dst, r.valLen), r.block, r.head+r.keyLen, r.valLen)
}

// VerifyInline checks the layout 4 inline record that slot s names in
// arena (the arena bytes of the bucket whose slot word s is, as READ)
// against key, appends its value to dst (so it does not allocate when dst
// has room) and returns the key's revision metadata. Errors as
// VerifyRecord's: ErrBadLength (s names bytes outside the arena or the
// record declares another length), ErrTorn (a word not carrying the
// slot's tag, a Mod whose low bits are not the slot's, bad padding or
// crc), ErrKeyMismatch, ErrDead, ErrHidden. It never panics and never
// reads outside arena. Header.VerifyInline reads the format of the
// header's layout.
func VerifyInline(arena, key []byte, s InlineSlot, dst []byte) (value []byte, meta revision.Meta, err error) {
	return verifyInline(format4, arena, key, s, dst)
}

// VerifyInline is the package's VerifyInline for a record of h's layout:
// a layout 3 record's version is returned as the Meta's Mod.
func (h Header) VerifyInline(arena, key []byte, s InlineSlot, dst []byte) (value []byte, meta revision.Meta, err error) {
	return verifyInline(formatOf(h.Version), arena, key, s, dst)
}

func verifyInline(f format, arena, key []byte, s InlineSlot, dst []byte) (value []byte, meta revision.Meta, err error) {
	r, err := parseInline(f, arena, key, s)
	if err != nil {
		return nil, revision.Meta{}, err
	}
	if err := stateErr(r.State); err != nil {
		return nil, revision.Meta{}, err
	}
	return r.AppendValue(dst), r.Meta, nil
}

// stateErr is what a reader makes of an intact record's state: nil for a
// live one.
func stateErr(state uint32) error {
	switch state {
	case stateLive:
		return nil
	case stateDead:
		return ErrDead
	case stateHidden:
		return ErrHidden
	}
	return ErrTorn
}

// parseInline is VerifyInline without the state: the record s names is
// intact, the one s names (tag, Mod's low bits, length) and key's. It
// does not allocate.
func parseInline(f format, arena, key []byte, s InlineSlot) (InlineRecord, error) {
	if !s.InArena(uint64(len(arena))) {
		return InlineRecord{}, ErrBadLength
	}
	block := arena[s.Offset : s.Offset+s.Len]
	if !tagsAre(block, s.Tag) || block[inlineZero] != 0 {
		return InlineRecord{}, ErrTorn
	}
	if s.Len < f.inlineLen(1, 0) {
		return InlineRecord{}, ErrBadLength // too short to hold the head
	}
	r := InlineRecord{State: uint32(binary.LittleEndian.Uint16(block[recState:])), block: block, head: f.inlineHead()}
	r.Meta, r.keyLen, r.valLen = inlineHeadOf(f, block)
	if r.keyLen == 0 || r.keyLen > MaxKey || r.valLen > MaxValue || f.inlineLen(r.keyLen, r.valLen) != s.Len {
		return InlineRecord{}, ErrBadLength
	}
	if uint32(r.Meta.Mod&inlineModMask) != s.Mod&inlineModMask {
		return InlineRecord{}, ErrTorn
	}
	end := r.head + r.keyLen + r.valLen
	if !zeroPayload(block, end) || payloadCRC(block) != binary.LittleEndian.Uint32(block) {
		return InlineRecord{}, ErrTorn
	}
	if r.keyLen != len(key) || !equalPayload(block, r.head, key) {
		return InlineRecord{}, ErrKeyMismatch
	}
	return r, nil
}

// inlineHeadOf reads the fixed part of the payload of the inline record
// in block (of format f, at least f.inlineLen(1, 0) bytes), gathered
// from its words.
func inlineHeadOf(f format, block []byte) (meta revision.Meta, keyLen, valLen int) {
	var h [revision.Size + 6]byte
	copyPayload(h[:f.inlineHead()], block, 0)
	le := binary.LittleEndian
	return f.decodeMeta(h[:]), int(le.Uint16(h[f.meta:])), int(le.Uint32(h[f.meta+2:]))
}

// tagsAre reports whether every word of block carries tag in its top byte.
func tagsAre(block []byte, tag uint8) bool {
	for off := inlineTagByte; off < len(block); off += inlineWord {
		if block[off] != tag {
			return false
		}
	}
	return true
}

// payloadAt is the stretch of block holding payload bytes from i to the
// end of their word.
func payloadAt(block []byte, i int) []byte {
	w := inlineWord * (1 + i/inlineGroup)
	return block[w+i%inlineGroup : w+inlineGroup]
}

// payloadCRC is CRC-32C of the whole padded payload of block.
func payloadCRC(block []byte) uint32 {
	var crc uint32
	for off := inlineWord; off < len(block); off += inlineWord {
		crc = crc32.Update(crc, castagnoli, block[off:off+inlineGroup])
	}
	return crc
}

// zeroPayload reports whether the payload from byte i on (the padding) is
// zero, as the writer leaves it.
func zeroPayload(block []byte, i int) bool {
	n := (len(block)/inlineWord - 1) * inlineGroup
	for i < n {
		p := payloadAt(block, i)
		if !zeroPadding(p) {
			return false
		}
		i += len(p)
	}
	return true
}

// equalPayload reports whether the payload from byte i on starts with want.
func equalPayload(block []byte, i int, want []byte) bool {
	for len(want) > 0 {
		p := payloadAt(block, i)
		c := min(len(p), len(want))
		if !bytes.Equal(p[:c], want[:c]) {
			return false
		}
		want = want[c:]
		i += c
	}
	return true
}

// copyPayload fills dst with the payload bytes of block from byte i on
// (block must hold them).
func copyPayload(dst, block []byte, i int) {
	for len(dst) > 0 {
		c := copy(dst, payloadAt(block, i))
		dst = dst[c:]
		i += c
	}
}

// appendPayload appends n payload bytes of block from byte i on to dst.
func appendPayload(dst, block []byte, i, n int) []byte {
	for n > 0 {
		p := payloadAt(block, i)
		c := min(len(p), n)
		dst = append(dst, p[:c]...)
		n -= c
		i += c
	}
	return dst
}
