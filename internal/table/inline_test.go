package table

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// makeInline encodes an inline record into a fresh block, under the tag rule
// T picks for a zeroed block (1), and returns it with its slot word.
func makeInline(key, value []byte, version uint64, state uint32) ([]byte, InlineSlot) {
	n := InlineLen(len(key), len(value))
	block := make([]byte, n)
	tag := WriteInlineRecord(block, key, value, mv(version), state)
	return block, InlineSlot{Len: n, Tag: tag, Mod: uint32(version) & inlineModMask, FP: 7}
}

func TestInlineLen(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		k, v int
		want uint64
	}{
		{1, 0, MinInline}, {16, 16, 88}, {16, 256, 368}, {1, 10, 56 + 8}, {1, 11, 72},
	} {
		if got := InlineLen(c.k, c.v); got != c.want {
			t.Errorf("InlineLen(%d, %d) = %d, want %d", c.k, c.v, got, c.want)
		}
	}
	if MinInline != 56 {
		t.Errorf("MinInline = %d", MinInline)
	}
	if MaxInline/inlineWord >= 255 || MaxInline%inlineWord != 0 {
		t.Errorf("MaxInline %d leaves no free tag", MaxInline)
	}
}

// TestInlineRoundTrip: every key/value size pair up to ~300 bytes encodes
// to the formula's length and verifies to its own value, in every state.
func TestInlineRoundTrip(t *testing.T) {
	t.Parallel()
	for kl := 1; kl <= 300; kl += 1 + kl/8 {
		for vl := 0; vl <= 300; vl += 1 + vl/5 {
			key, value := pattern(kl, 1), pattern(vl, 2)
			version := uint64(kl)<<40 | uint64(vl)<<20 | 0x5a5a5
			block, s := makeInline(key, value, version, stateLive)
			if want := 8 * (1 + (38+kl+vl+6)/7); len(block) != want {
				t.Fatalf("k%d v%d: %d bytes, want %d", kl, vl, len(block), want)
			}
			got, ver, err := verInl(block, key, s, nil)
			if err != nil || ver != version || !bytes.Equal(got, value) {
				t.Fatalf("k%d v%d: %q %x %v", kl, vl, got, ver, err)
			}
			for state, want := range map[uint32]error{stateDead: ErrDead, stateHidden: ErrHidden, 3: ErrTorn, stateLive: nil} {
				stores{}.setInlineState(block, state)
				if _, _, err := verInl(block, key, s, nil); err != want {
					t.Fatalf("k%d v%d state %d: %v, want %v", kl, vl, state, err, want)
				}
			}
		}
	}
}

// TestInlineRejects breaks one condition at a time.
func TestInlineRejects(t *testing.T) {
	t.Parallel()
	key, value := []byte("some key"), pattern(40, 9)
	const version = 1<<30 | 12345
	fresh := func() ([]byte, InlineSlot) { return makeInline(key, value, version, stateLive) }
	for _, c := range []struct {
		name   string
		break_ func(b []byte, s *InlineSlot, k *[]byte)
		want   error
	}{
		{"intact", func([]byte, *InlineSlot, *[]byte) {}, nil},
		{"tag of word 0", func(b []byte, _ *InlineSlot, _ *[]byte) { b[7]++ }, ErrTorn},
		{"tag of a middle word", func(b []byte, _ *InlineSlot, _ *[]byte) { b[31] = 200 }, ErrTorn},
		{"tag of the last word", func(b []byte, _ *InlineSlot, _ *[]byte) { b[len(b)-1]-- }, ErrTorn},
		{"slot tag", func(_ []byte, s *InlineSlot, _ *[]byte) { s.Tag = 2 }, ErrTorn},
		{"no tag", func(b []byte, s *InlineSlot, _ *[]byte) { retag(b, 0); s.Tag = 0 }, ErrBadLength},
		{"version low bits", func(_ []byte, s *InlineSlot, _ *[]byte) { s.Mod ^= 1 << 22 }, ErrTorn},
		{"slot length", func(_ []byte, s *InlineSlot, _ *[]byte) { s.Len -= 8 }, ErrBadLength},
		{"declared value length", func(b []byte, _ *InlineSlot, _ *[]byte) { b[46] += 7 }, ErrBadLength},
		{"declared key length 0", func(b []byte, _ *InlineSlot, _ *[]byte) { b[44], b[45] = 0, 0 }, ErrBadLength},
		{"padding, crc matching", func(b []byte, _ *InlineSlot, _ *[]byte) { b[len(b)-2] = 1; recrc(b) }, ErrTorn},
		{"padding", func(b []byte, _ *InlineSlot, _ *[]byte) { b[len(b)-2] = 1 }, ErrTorn},
		{"word 0's zero byte", func(b []byte, _ *InlineSlot, _ *[]byte) { b[6] = 1 }, ErrTorn},
		{"crc", func(b []byte, _ *InlineSlot, _ *[]byte) { b[0]++ }, ErrTorn},
		{"value byte", func(b []byte, _ *InlineSlot, _ *[]byte) { b[40]++ }, ErrTorn},
		{"other key", func(_ []byte, _ *InlineSlot, k *[]byte) { *k = []byte("some kez") }, ErrKeyMismatch},
		{"key a prefix of the record's", func(_ []byte, _ *InlineSlot, k *[]byte) { *k = []byte("some") }, ErrKeyMismatch},
		{"record's key a prefix", func(_ []byte, _ *InlineSlot, k *[]byte) { *k = []byte("some key!") }, ErrKeyMismatch},
		{"dead", func(b []byte, _ *InlineSlot, _ *[]byte) { stores{}.setInlineState(b, stateDead) }, ErrDead},
		{"hidden", func(b []byte, _ *InlineSlot, _ *[]byte) { stores{}.setInlineState(b, stateHidden) }, ErrHidden},
		{"unknown state", func(b []byte, _ *InlineSlot, _ *[]byte) { stores{}.setInlineState(b, 0x100) }, ErrTorn},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, s := fresh()
			k := key
			c.break_(b, &s, &k)
			got, ver, err := verInl(b, k, s, nil)
			if err != c.want {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if err == nil && (ver != version || !bytes.Equal(got, value)) {
				t.Fatalf("got %q %x", got, ver)
			}
		})
	}
}

// recrc makes word 0's crc match the payload, as a forger would.
func recrc(b []byte) {
	binary.LittleEndian.PutUint32(b, payloadCRC(b))
}

// TestCopyInline: a copy verifies under its own tag with the original's
// content and state, in a block whose old content held the original's tag.
func TestCopyInline(t *testing.T) {
	t.Parallel()
	key, value := []byte("moving"), pattern(50, 4)
	src, s := makeInline(key, value, 77, stateHidden)
	dst := make([]byte, len(src))
	retag(dst, s.Tag)
	tag := stores{}.copyInline(dst, src)
	if tag == s.Tag {
		t.Fatalf("the copy kept tag %d, which its block held", tag)
	}
	c := s
	c.Tag = tag
	if _, _, err := verInl(dst, key, c, nil); err != ErrHidden {
		t.Fatalf("copy of a hidden record: %v", err)
	}
	stores{}.setInlineState(dst, stateLive)
	if got, ver, err := verInl(dst, key, c, nil); err != nil || ver != 77 || !bytes.Equal(got, value) {
		t.Fatalf("copy: %q %d %v", got, ver, err)
	}
	if _, _, err := verInl(dst, key, s, nil); err != ErrTorn {
		t.Fatalf("the copy verifies under the original's tag: %v", err)
	}
}

// retag stores tag in every word's top byte.
func retag(b []byte, tag uint8) {
	for i := inlineTagByte; i < len(b); i += inlineWord {
		b[i] = tag
	}
}

// TestInlineSlotWord: fields survive a round trip, the kind bit tells the
// kinds apart, and InArena bounds what a reader may touch.
func TestInlineSlotWord(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		s := InlineSlot{
			Offset: 8 * r.Uint64N(1<<inlineOffBits),
			Len:    8 * r.Uint64N(1<<inlineLenBits),
			Tag:    uint8(r.Uint32()),
			Mod:    r.Uint32() & inlineModMask,
			FP:     uint16(1 + r.Uint32N(4095)),
		}
		w := s.Word()
		if !IsInline(w) || DecodeInlineSlot(w) != s || uint16(w>>52) != s.FP {
			t.Fatalf("%+v -> %#x -> %+v", s, w, DecodeInlineSlot(w))
		}
	}
	if IsInline(Slot{Offset: 1 << 34, Len: 1 << 20, FP: 4095}.Word()) {
		t.Fatal("an out-of-place word reads as inline")
	}
	const arena = 1440
	for _, c := range []struct {
		s  InlineSlot
		ok bool
	}{
		{InlineSlot{Offset: 0, Len: MinInline, Tag: 1}, true},
		{InlineSlot{Offset: arena - 64, Len: 64, Tag: 255}, true},
		{InlineSlot{Offset: arena - 56, Len: 64, Tag: 1}, false},
		{InlineSlot{Offset: 0, Len: minInlineAny - 8, Tag: 1}, false},
		{InlineSlot{Offset: 0, Len: 64, Tag: 0}, false},
		{InlineSlot{Offset: 0, Len: arena + 8, Tag: 1}, false},
		{InlineSlot{Offset: 32760, Len: 2040, Tag: 1}, false},
	} {
		if got := c.s.InArena(arena); got != c.ok {
			t.Errorf("%+v.InArena(%d) = %v", c.s, arena, got)
		}
	}
	if (InlineSlot{Len: MaxInline + 8, Tag: 1}).InArena(MaxArenaBytes) {
		t.Error("a record longer than MaxInline is in bounds")
	}
}

func TestChooseTag(t *testing.T) {
	t.Parallel()
	b := make([]byte, MaxInline)
	if got := chooseTag(b); got != 1 {
		t.Fatalf("zero block: tag %d", got)
	}
	for i := range MaxInline / inlineWord { // tags 0..253 held: 254 is free
		b[i*inlineWord+inlineTagByte] = uint8(i)
	}
	if got := chooseTag(b); got != 254 {
		t.Fatalf("tags 0..253 held: chose %d", got)
	}
	b[7] = 255 // 0 is free but not a tag; 254 still is
	if got := chooseTag(b); got != 254 {
		t.Fatalf("chose %d", got)
	}
	all := make([]byte, 256*inlineWord)
	for i := range 256 {
		all[i*inlineWord+inlineTagByte] = uint8(i)
	}
	if got := chooseTag(all); got != 0 {
		t.Fatalf("every tag held: chose %d", got)
	}
}

// mixWords returns, for every word of dst, the word of old (bit clear in
// pick) or of new (bit set).
func mixWords(dst, old, new []byte, pick func(i int) bool) {
	for i := 0; i < len(dst); i += inlineWord {
		src := old
		if pick(i / inlineWord) {
			src = new
		}
		copy(dst[i:i+inlineWord], src[i:i+inlineWord])
	}
}

// tornCase is an arena (before) in which a writer writes record B at off
// (after); the reader may see any word from either.
type tornCase struct {
	name          string
	before, after []byte
	sA, sB        []InlineSlot // slot words naming records in before, after
	keys          [][]byte     // of sA's records; B's is keys[len(keys)-1]
	valA          [][]byte
	valB          []byte
}

// TestInlineTornReadsDetected: a block holds old content (one record, or
// several smaller ones: the reuse case); the writer picks a tag by rule T
// and writes record B over it word by word. A READ that takes each word from
// the old or the new content accepts, with B's slot word, only all of B,
// and, with an old record's slot word, only all of that record, never a
// mixture; and every mixture breaks the tag of some word (so the rejection
// does not rest on the crc).
func TestInlineTornReadsDetected(t *testing.T) {
	t.Parallel()
	key := []byte("hot-key")
	for _, c := range []struct {
		name string
		olds [][2]int // offset and value length of the old records (same key)
		offB int
		valB int
	}{
		{"same length", [][2]int{{0, 20}}, 0, 20},
		{"old longer", [][2]int{{0, 60}}, 0, 20},
		{"old shorter", [][2]int{{0, 5}}, 0, 30},
		{"long records", [][2]int{{0, 200}}, 0, 150},
		{"reuse of three small records", [][2]int{{0, 4}, {64, 4}, {128, 10}}, 0, 140},
		{"reuse across an offset", [][2]int{{0, 4}, {64, 30}}, 16, 60},
	} {
		t.Run(c.name, func(t *testing.T) {
			arena := make([]byte, 512)
			var olds []InlineSlot
			var oldVals [][]byte
			for i, o := range c.olds {
				v := pattern(o[1], byte(10*i+1))
				n := InlineLen(len(key), len(v))
				block := arena[o[0] : o[0]+int(n)]
				ver := uint64(100 + i)
				tag := WriteInlineRecord(block, key, v, mv(ver), stateLive)
				olds = append(olds, InlineSlot{Offset: uint64(o[0]), Len: n, Tag: tag, Mod: uint32(ver)})
				oldVals = append(oldVals, v)
			}
			before := bytes.Clone(arena)
			vB := pattern(c.valB, 77)
			nB := InlineLen(len(key), len(vB))
			tagB := WriteInlineRecord(arena[c.offB:c.offB+int(nB)], key, vB, mv(200), stateLive)
			sB := InlineSlot{Offset: uint64(c.offB), Len: nB, Tag: tagB, Mod: 200}
			checkTorn(t, before, arena, key, sB, vB, olds, oldVals)
		})
	}
}

// checkTorn reads every (or, for many changed words, a random sample of)
// mixture of before and after.
func checkTorn(t *testing.T, before, after, key []byte, sB InlineSlot, vB []byte, olds []InlineSlot, oldVals [][]byte) {
	t.Helper()
	var changed []int // words that differ
	for i := 0; i < len(after); i += inlineWord {
		if !bytes.Equal(before[i:i+inlineWord], after[i:i+inlineWord]) {
			changed = append(changed, i/inlineWord)
		}
	}
	n := len(changed)
	r := rand.New(rand.NewPCG(uint64(n), 3))
	exhaustive := n <= 14
	trials := 1 << n
	if !exhaustive {
		trials = 20000
	}
	read := make([]byte, len(after))
	isNew := make(map[int]bool, n)
	for trial := range trials {
		for j, w := range changed {
			switch {
			case exhaustive:
				isNew[w] = trial>>j&1 != 0
			case trial < 2: // the two pure reads
				isNew[w] = trial == 1
			default:
				isNew[w] = r.IntN(2) == 0
			}
		}
		mixWords(read, before, after, func(i int) bool { return isNew[i] })
		// B's slot: accept only if every word of B's block is new.
		allNew := allWords(sB, isNew, true)
		checkRead(t, read, key, sB, vB, allNew, fmt.Sprintf("B, trial %d", trial))
		for k, o := range olds {
			allOld := allWords(o, isNew, false)
			checkRead(t, read, key, o, oldVals[k], allOld, fmt.Sprintf("old %d, trial %d", k, trial))
		}
	}
}

// allWords reports whether every changed word of s's block is new (want
// true) or old (want false).
func allWords(s InlineSlot, isNew map[int]bool, want bool) bool {
	for i := s.Offset / inlineWord; i < (s.Offset+s.Len)/inlineWord; i++ {
		if v, changed := isNew[int(i)]; changed && v != want {
			return false
		}
	}
	return true
}

func checkRead(t *testing.T, read, key []byte, s InlineSlot, want []byte, pure bool, what string) {
	t.Helper()
	got, _, err := verInl(read, key, s, nil)
	if pure {
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: the whole record read back as %q, %v", what, got, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("%s: accepted a mixture: %q", what, got)
	}
	if tagsAre(read[s.Offset:s.Offset+s.Len], s.Tag) {
		t.Fatalf("%s: a mixture carries the slot's tag in every word (rule T)", what)
	}
}

// TestRecordImageInValueRejected: record X's value holds, word for word,
// the exact image of key K's inline record R (all but the top bytes, which
// are X's tag). Reading at the image's offset with R's slot word passes
// every check but the tag: it is rejected because top bytes are the
// writer's, and would be accepted if the tags agreed.
func TestRecordImageInValueRejected(t *testing.T) {
	t.Parallel()
	keyK, valK := []byte("victim"), []byte("the value an attacker wants read")
	// R was written over an older record of tag 1, so its tag is not 1,
	// the tag X gets in a fresh block.
	image := make([]byte, InlineLen(len(keyK), len(valK)))
	retag(image, 1)
	sR := InlineSlot{Len: uint64(len(image)), Mod: 4242, FP: 7}
	sR.Tag = WriteInlineRecord(image, keyK, valK, mv(4242), stateLive)
	// X's value, placed so that R's word i lands in X's word 3+i: X's
	// payload from byte 14 (after its head) is key X, then value; word 3
	// starts at payload byte 14.
	keyX := []byte("attacker")
	// Payload byte p of X lies in word 1+p/7: pad X's value so that the
	// image starts on a word's first byte.
	pre := (inlineGroup - (format4.inlineHead()+len(keyX))%inlineGroup) % inlineGroup
	valX := make([]byte, pre)
	for i := 0; i < len(image); i += inlineWord {
		valX = append(valX, image[i:i+inlineGroup]...)
	}
	valX = append(valX, pattern(20, 3)...)
	nX := InlineLen(len(keyX), len(valX))
	arena := make([]byte, 1024)
	tagX := WriteInlineRecord(arena[:nX], keyX, valX, mv(1), stateLive)
	// Find the image: the first word whose low 7 bytes are R's word 0's.
	at := -1
	for i := 0; i+len(image) <= int(nX); i += inlineWord {
		if bytes.Equal(arena[i:i+inlineGroup], image[:inlineGroup]) {
			at = i
			break
		}
	}
	if at < 0 {
		t.Fatal("the image is not word-aligned in X's block")
	}
	for i := 0; i < len(image); i += inlineWord {
		if !bytes.Equal(arena[at+i:at+i+inlineGroup], image[i:i+inlineGroup]) {
			t.Fatalf("image word %d differs", i/inlineWord)
		}
	}
	s := sR
	s.Offset = uint64(at)
	if tagX == sR.Tag {
		t.Fatalf("test setup: X's tag %d equals R's", tagX)
	}
	if _, _, err := verInl(arena, keyK, s, nil); err != ErrTorn {
		t.Fatalf("the image inside X's value verifies: %v", err)
	}
	// The tag is the only thing that differs: with X's tag in the slot
	// word the image passes every other check.
	s.Tag = tagX
	if got, _, err := verInl(arena, keyK, s, nil); err != nil || !bytes.Equal(got, valK) {
		t.Fatalf("with the tags agreeing the image should pass the other checks: %q %v", got, err)
	}
}

// TestVerifyInlineNeverOutOfBounds: slot words naming anything near an
// arena's end are rejected without touching bytes past it.
func TestVerifyInlineNeverOutOfBounds(t *testing.T) {
	t.Parallel()
	arena := make([]byte, 256)
	block, s := makeInline([]byte("k"), pattern(30, 1), 9, stateLive)
	copy(arena[256-len(block):], block)
	for off := uint64(0); off < 1<<inlineOffBits*8; off += 8 {
		for n := uint64(0); n < 1<<inlineLenBits*8; n += 8 {
			s.Offset, s.Len = off, n
			_, _, err := verInl(arena, []byte("k"), s, nil)
			if err == nil && (off != 256-uint64(len(block)) || n != uint64(len(block))) {
				t.Fatalf("accepted at %d+%d", off, n)
			}
		}
	}
}

func BenchmarkEncodeInline(b *testing.B) {
	for _, n := range []int{64, 256} {
		b.Run(fmt.Sprintf("value=%d", n), func(b *testing.B) {
			key, value := []byte("user:0000000042"), pattern(n, 1)
			block := make([]byte, InlineLen(len(key), len(value)))
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				_, buf = stores{}.writeInline(block, buf, key, value, mv(7), stateHidden)
			}
		})
	}
}

func BenchmarkVerifyInline(b *testing.B) {
	key, value := []byte("user:0000000042"), pattern(64, 1)
	block, s := makeInline(key, value, 7, stateLive)
	dst := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		v, _, err := verInl(block, key, s, dst)
		if err != nil {
			b.Fatal(err)
		}
		sinkInt += len(v)
	}
}
