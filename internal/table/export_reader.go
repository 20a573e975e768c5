package table

// Helpers for readers' tests (client): they place inline records by hand,
// in states and at moments the writer never makes on its own (a block
// rewritten while a READ runs, a word naming bytes past its arena). Not for
// writing a live table: nothing here takes the table's lock or keeps its
// allocator's books.

// WriteInlineRecord writes the tagged inline record for key, value and
// version into block (exactly InlineLen(len(key), len(value)) bytes, at an
// 8-aligned place in an arena) in state 0 (live), 1 (dead) or 2 (hidden),
// under a tag chosen by rule T, and returns the tag for the slot word.
func WriteInlineRecord(block, key, value []byte, version uint64, state uint32) uint8 {
	return stores{}.writeInline(block, key, value, version, state)
}

// SetInlineRecordState changes the state of the inline record in block as
// the writer does: one 4-byte store, the tag kept.
func SetInlineRecordState(block []byte, state uint32) { stores{}.setInlineState(block, state) }
