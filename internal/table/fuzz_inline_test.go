package table

import (
	"bytes"
	"testing"
)

// FuzzVerifyInline: arbitrary arena bytes and slot words never panic;
// nothing is accepted unless every word of the block carries the slot's
// tag; and whatever parses is exactly the block a writer would have
// written for that key, value, version, state and tag.
func FuzzVerifyInline(f *testing.F) {
	for _, c := range []struct {
		key, value string
		state      uint32
	}{{"k", "", stateLive}, {"key", "value", stateLive}, {"a", "0123456789abcdef", stateHidden}, {"dead", "x", stateDead}} {
		block, s := makeInline([]byte(c.key), []byte(c.value), 1<<23|9, c.state)
		arena := append(make([]byte, 16), block...)
		s.Offset = 16
		f.Add(arena, []byte(c.key), s.Word())
		f.Add(arena, []byte(c.key), s.Word()+1<<inlineTagPos)
		f.Add(block[:len(block)-8], []byte(c.key), s.Word()-16/8)
		f.Add(arena, []byte(c.key[:1]), s.Word()) // a prefix of the key
	}
	f.Add([]byte{}, []byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, arena, key []byte, w uint64) {
		s := DecodeInlineSlot(w)
		value, version, err := VerifyInline(arena, key, s, nil)
		r, perr := parseInline(arena, key, s)
		if perr != nil {
			if err != perr {
				t.Fatalf("VerifyInline %v, parseInline %v", err, perr)
			}
			return
		}
		if (err == nil) != (r.State == stateLive) || err == nil && (version != r.Version || !bytes.Equal(value, r.AppendValue(nil))) {
			t.Fatalf("VerifyInline %v %x %q; parseInline %+v", err, version, value, r)
		}
		block := arena[s.Offset : s.Offset+s.Len]
		if !tagsAre(block, s.Tag) {
			t.Fatalf("accepted a block whose words do not all carry tag %d: % x", s.Tag, block)
		}
		want := make([]byte, len(block))
		stores{}.encodeInline(want, key, r.AppendValue(nil), r.Version, r.State, s.Tag)
		if !bytes.Equal(want, block) {
			t.Fatalf("accepted bytes the writer would not produce:\n got % x\nwant % x", block, want)
		}
	})
}
