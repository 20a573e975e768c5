package table

// The inline kind of layout 3 and 4's slot word (docs/layout.md,
// "Slots"): bit 51 set; the record lies in the arena of the bucket that holds
// the word. The fingerprint keeps layout 2's bits 52-63, so a bucket is
// scanned for a key the same way whatever kind its words are.
const (
	inlineKindBit = slotInline
	inlineOffBits = 12 // offset within the arena / 8
	inlineLenBits = 8  // length / 8
	inlineTagBits = 8
	inlineTagPos  = inlineOffBits + inlineLenBits
	inlineModPos  = inlineTagPos + inlineTagBits
	inlineFPPos   = slotFPShift

	// minInlineAny is the shortest inline record of any layout (layout 3's:
	// format3.inlineLen(1, 0)).
	minInlineAny = inlineWord * (1 + (8+6+1+inlineGroup-1)/inlineGroup)

	// MaxArenaBytes is the largest arena an inline slot word can address.
	MaxArenaBytes = inlineWord << inlineOffBits
)

// InlineSlot is a decoded inline slot word.
type InlineSlot struct {
	Offset uint64 // of the record within its bucket's arena
	Len    uint64 // of the record
	Tag    uint8  // every word of the record carries it (1..255)
	Mod    uint32 // the record's Meta.Mod (layout 3: its version), low 23 bits
	FP     uint16 // 12 bits of the key's hash, never 0
}

// IsInline reports whether slot word w is of the inline kind.
func IsInline(w uint64) bool { return w&inlineKindBit != 0 }

// DecodeInlineSlot splits an inline slot word into its fields. It accepts
// any word; check IsInline first, and InArena before reading the record.
func DecodeInlineSlot(w uint64) InlineSlot {
	return InlineSlot{
		Offset: (w & (1<<inlineOffBits - 1)) * inlineWord,
		Len:    (w >> inlineOffBits & (1<<inlineLenBits - 1)) * inlineWord,
		Tag:    uint8(w >> inlineTagPos),
		Mod:    uint32(w>>inlineModPos) & inlineModMask,
		FP:     uint16(w >> inlineFPPos),
	}
}

// Word encodes s as an inline slot word. s must name a real record
// (Offset and Len multiples of 8 within the field limits, FP in 1..4095);
// Mod may hold more bits, only its low 23 are kept.
func (s InlineSlot) Word() uint64 {
	return s.Offset/inlineWord | s.Len/inlineWord<<inlineOffBits |
		uint64(s.Tag)<<inlineTagPos | uint64(s.Mod&inlineModMask)<<inlineModPos |
		inlineKindBit | uint64(s.FP)<<inlineFPPos
}

// InArena reports whether s could name a record inside an arena of
// arenaBytes bytes: the record lies wholly inside, is at least the
// shortest of any layout's (layout 3's: a reader checks the exact length
// against the record's own fields) and at most MaxInline long, and has a tag. A word from a torn or stale read
// can name anything; check before reading.
func (s InlineSlot) InArena(arenaBytes uint64) bool {
	return s.Tag != 0 && s.Len >= minInlineAny && s.Len <= MaxInline &&
		s.Len <= arenaBytes && s.Offset <= arenaBytes-s.Len
}
