package table

import (
	"bytes"
	"testing"
)

// FuzzVerifyInline: arbitrary arena bytes and slot words never panic;
// nothing is accepted unless every word of the block carries the slot's
// tag; and whatever parses is exactly the block a writer would have
// written for that key, value, metadata, state and tag (layout 4), and a
// layout 3 reader never accepts what the layout 4 one rejects as torn.
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
	// A layout 3 record, which a layout 4 reader must not take for its own.
	b3, s3 := makeInline3([]byte("key"), []byte("value"), 9, stateLive)
	f.Add(b3, []byte("key"), s3.Word())
	f.Add([]byte{}, []byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, arena, key []byte, w uint64) {
		s := DecodeInlineSlot(w)
		_, _, _ = (Header{Version: LayoutVersion3}).VerifyInline(arena, key, s, nil) // never panics
		value, meta, err := VerifyInline(arena, key, s, nil)
		r, perr := parseInline(format4, arena, key, s)
		if perr != nil {
			if err != perr {
				t.Fatalf("VerifyInline %v, parseInline %v", err, perr)
			}
			return
		}
		if (err == nil) != (r.State == stateLive) || err == nil && (meta != r.Meta || !bytes.Equal(value, r.AppendValue(nil))) {
			t.Fatalf("VerifyInline %v %+v %q; parseInline %+v", err, meta, value, r)
		}
		block := arena[s.Offset : s.Offset+s.Len]
		if !tagsAre(block, s.Tag) {
			t.Fatalf("accepted a block whose words do not all carry tag %d: % x", s.Tag, block)
		}
		want := make([]byte, len(block))
		stores{}.encodeInline(want, nil, key, r.AppendValue(nil), r.Meta, r.State, s.Tag)
		if !bytes.Equal(want, block) {
			t.Fatalf("accepted bytes the writer would not produce:\n got % x\nwant % x", block, want)
		}
	})
}
