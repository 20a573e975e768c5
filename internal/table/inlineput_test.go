package table

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

// inlineCfg is a small-arena configuration: records of up to 176 bytes
// (tagged format) inline, arenas reused 10ms after retirement.
var inlineCfg = Config{Buckets: 8, Grace: 20 * time.Millisecond, InlineMax: 176, InlineGrace: 10 * time.Millisecond}

// mustGet fails unless key reads value at version, both through the
// writer's Get and a reader's lookup.
func mustGet(t *testing.T, tab *Table, mem, key, value []byte, version uint64) {
	t.Helper()
	v, m, ok, err := tab.Get(key)
	if ver := m.Mod; err != nil || !ok || ver != version || !bytes.Equal(v, value) {
		t.Fatalf("Get(%s) = %q, %d, %v, %v; want %q, %d", key, v, ver, ok, err, value, version)
	}
	v, ver, err := lookup(mem, key)
	if err != nil || ver != version || !bytes.Equal(v, value) {
		t.Fatalf("lookup(%s) = %q, %d, %v; want %q, %d", key, v, ver, err, value, version)
	}
}

// TestPutInlineRoundTrip: a small record is written inline (an inline
// word, in its bucket's arena), read back by the writer and by a reader,
// updated (inline again, the old block to arena limbo), grown past
// InlineMax (out of place), shrunk back, and deleted; arena bytes add up
// at every step.
func TestPutInlineRoundTrip(t *testing.T) {
	t.Parallel()
	tab, mem, clk := newTable(t, 64<<10, inlineCfg)
	k := []byte("key")
	steps := []struct {
		value  []byte
		inline bool
	}{
		{[]byte("small"), true},
		{bytes.Repeat([]byte{'b'}, 100), true},
		{bytes.Repeat([]byte{'c'}, 200), false},
		{nil, true},
	}
	var limbo uint64
	for i, st := range steps {
		ver := uint64(i + 1)
		if err := tab.Put(k, st.value, mv(ver)); err != nil {
			t.Fatal(err)
		}
		w := slotOf(t, tab, k)
		if IsInline(w) != st.inline {
			t.Fatalf("step %d: word %#x inline %v, want %v", i, w, IsInline(w), st.inline)
		}
		mustGet(t, tab, mem, k, st.value, ver)
		s := tab.Stats()
		if i > 0 && steps[i-1].inline {
			limbo += InlineLen(len(k), len(steps[i-1].value))
		}
		var used uint64
		if st.inline {
			used = InlineLen(len(k), len(st.value))
		}
		if s.ArenaUsed != used || s.ArenaLimbo != limbo || s.Spills != 0 {
			t.Fatalf("step %d: stats %+v, want arena used %d, limbo %d", i, s, used, limbo)
		}
	}
	if ok, err := tab.Delete(k); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, _, err := lookup(mem, k); !errors.Is(err, errMiss) {
		t.Fatalf("lookup after delete: %v", err)
	}
	clk.Advance(11 * time.Millisecond)
	if s := tab.Stats(); s.ArenaUsed != 0 || s.ArenaLimbo != 0 || s.ArenaBytes != 8*1792 {
		t.Fatalf("after delete and Gi: %+v", s)
	}
}

// TestInlineOffByDefault: with InlineMax 0 no word is inline and no arena
// byte is counted.
func TestInlineOffByDefault(t *testing.T) {
	t.Parallel()
	tab, _, _ := newTable(t, 64<<10, Config{Buckets: 8})
	for i := range 20 {
		if err := tab.Put([]byte(fmt.Sprint(i)), []byte("v"), mv(1)); err != nil {
			t.Fatal(err)
		}
		if w := slotOf(t, tab, []byte(fmt.Sprint(i))); IsInline(w) {
			t.Fatalf("inline word %#x without arenas", w)
		}
	}
	if s := tab.Stats(); s.ArenaBytes != 0 || s.ArenaUsed != 0 || s.Spills != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// placeInlineIn writes key=value inline into bucket b directly (an exact
// bucket layout), as a Put of a new key would.
func placeInlineIn(t *testing.T, tab *Table, key, value []byte, b uint32) {
	t.Helper()
	n := InlineLen(len(key), len(value))
	off, ok := tab.arenas.alloc(b, n)
	if !ok || tab.spare(b) == 0 {
		t.Fatalf("placeInlineIn %q: no room in bucket %d", key, b)
	}
	l := loc{off: tab.arenaBase(b) + off, n: n, inline: true, bucket: b}
	storeWord(tab.mem, tab.emptyIn(b), tab.writeHidden(l, key, value, mv(1), Fingerprint(Hash(key))))
	tab.setState(l, stateLive)
	tab.records++
}

// fillArenaLimbo puts all of bucket b's free arena bytes in limbo, as a
// run of superseded records would.
func fillArenaLimbo(tab *Table, b uint32) {
	for n := tab.arenas.arenaBytes; n >= inlineWord; n -= inlineWord {
		for {
			off, ok := tab.arenas.alloc(b, n)
			if !ok {
				break
			}
			tab.arenas.free(b, off, n, tab.clock())
		}
	}
}

// TestMoveCarriesInlineRecord: a key whose record is inline moves with it
// (the layout of TestMoveMakesRoomAndWaitsGrace: new key X fits only if K
// moves from bucket 0 to 1). With room in bucket 1's arena the copy is
// inline there under a tag of its own; with that arena full, the copy
// goes to the record area; with the record area full too, no move is
// made and X is refused, the table unchanged. Inside an atomic group, a
// withheld K moves hidden and EndAtomic reveals its copy.
func TestMoveCarriesInlineRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		arenaFull, areaFull    bool
		group                  bool
		wantInline, wantRefuse bool
	}{
		{name: "into the arena", wantInline: true},
		{name: "arena full: record area", arenaFull: true},
		{name: "record area full: into the arena", areaFull: true, wantInline: true},
		{name: "arena and area full: refused", arenaFull: true, areaFull: true, wantRefuse: true},
		{name: "hidden in a group", group: true, wantInline: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const nb = 4
			cfg := Config{Buckets: nb, Grace: testGrace, InlineMax: 176}
			tab, mem, _ := newTable(t, 16<<10+nb*1536, cfg)
			k := keysFor("K", nb, 0, 1, 1)[0]
			// Bucket 0's arena as earlier records left it: every word's
			// top byte 1, so K's record takes tag 2 (rule T) and its copy
			// into bucket 1's fresh arena tag 1.
			for off := tab.arenaBase(0) + inlineTagByte; off < tab.arenaBase(0)+tab.arenas.arenaBytes; off += inlineWord {
				mem[off] = 1
			}
			placeInlineIn(t, tab, k, []byte("kv"), 0)
			if tag := DecodeInlineSlot(slotOf(t, tab, k)).Tag; tag != 2 {
				t.Fatalf("K's tag %d, want 2", tag)
			}
			fillAroundK(t, tab, nb)
			if tc.arenaFull {
				fillArenaLimbo(tab, 1)
			}
			if tc.areaFull {
				for tab.alloc.fits(MinRecord) {
					off, _ := tab.alloc.alloc(MinRecord)
					tab.alloc.retire(off, MinRecord, tab.clock())
				}
			}
			before := tab.Stats()
			old := slotOf(t, tab, k)
			if tc.group {
				tab.BeginAtomic()
				tab.Withhold(k)
			}
			x := keysFor("X", nb, 0, 3, 1)[0]
			err := tab.Put(x, nil, mv(2))
			if tc.wantRefuse {
				if !errors.Is(err, ErrNoSpace) || slotOf(t, tab, k) != old || tab.Stats() != before {
					t.Fatalf("Put(X) = %v; K's word %#x (was %#x); stats %+v, were %+v", err, slotOf(t, tab, k), old, tab.Stats(), before)
				}
				mustGet(t, tab, mem, k, []byte("kv"), 1)
				return
			}
			if err != nil {
				t.Fatalf("X needs K to move: %v", err)
			}
			w := slotOf(t, tab, k)
			if b := bucketOf(t, tab, k); b != 1 || IsInline(w) != tc.wantInline {
				t.Fatalf("K in bucket %d, word %#x (inline %v), want bucket 1, inline %v", b, w, IsInline(w), tc.wantInline)
			}
			if tc.group {
				if _, _, err := lookup(mem, k); !errors.Is(err, ErrHidden) {
					t.Fatalf("K moved within its group reads %v, want hidden", err)
				}
				tab.EndAtomic()
			}
			mustGet(t, tab, mem, k, []byte("kv"), 1)
			if tc.wantInline && DecodeInlineSlot(w).Tag != 1 {
				t.Fatalf("K's copy has tag %d, want 1 (rule T in its new block)", DecodeInlineSlot(w).Tag)
			}
			st := tab.Stats()
			n := InlineLen(len(k), 2)
			if st.ArenaLimbo != before.ArenaLimbo+n || st.Moves != 1 {
				t.Fatalf("stats %+v: the old copy's %d bytes not in arena limbo (before %+v)", st, n, before)
			}
			if !tc.wantInline && (st.BytesPayload != before.BytesPayload+RecordLen(len(k), 2) || st.Spills != 1) {
				t.Fatalf("the record-area copy is not counted: %+v", st)
			}
		})
	}
}

// TestHotKeySpillsThenInlineAgain: a key updated faster than the inline
// grace period fills its arena with superseded records; its next updates
// spill to the record area (counted), and once the grace period has
// passed it is written inline again.
func TestHotKeySpillsThenInlineAgain(t *testing.T) {
	t.Parallel()
	tab, mem, clk := newTable(t, 64<<10, inlineCfg)
	k := []byte("hot")
	v := bytes.Repeat([]byte{'h'}, 100)
	n := InlineLen(len(k), len(v))
	fit := tab.arenas.arenaBytes / n // superseded records the arena holds
	ver := uint64(0)
	put := func() uint64 {
		ver++
		if err := tab.Put(k, v, mv(ver)); err != nil {
			t.Fatal(err)
		}
		mustGet(t, tab, mem, k, v, ver)
		return slotOf(t, tab, k)
	}
	for IsInline(put()) {
		if ver > 20 {
			t.Fatal("the arena never filled")
		}
	}
	st := tab.Stats()
	if st.Spills != 1 || ver != fit+1 || st.ArenaUsed != 0 || st.ArenaLimbo != fit*n {
		t.Fatalf("after %d updates: %+v", ver, st)
	}
	put()
	clk.Advance(inlineCfg.InlineGrace)
	if w := put(); !IsInline(w) {
		t.Fatalf("update after the inline grace period not inline: %#x", w)
	}
	if st := tab.Stats(); st.Spills != 2 || st.ArenaUsed != n || st.BytesLimbo != 2*RecordLen(len(k), len(v)) {
		t.Fatalf("stats %+v", st)
	}
}

// TestAtomicGroupInline: within a group, inline records are withheld and
// written hidden like out-of-place ones, and EndAtomic reveals them.
func TestAtomicGroupInline(t *testing.T) {
	t.Parallel()
	tab, mem, _ := newTable(t, 64<<10, inlineCfg)
	a, b := []byte("a"), []byte("b")
	for _, k := range [][]byte{a, b} {
		if err := tab.Put(k, []byte("old"), mv(1)); err != nil {
			t.Fatal(err)
		}
	}
	tab.BeginAtomic()
	tab.Withhold(a)
	tab.Withhold(b)
	for _, k := range [][]byte{a, b} {
		if _, _, err := lookup(mem, k); !errors.Is(err, ErrHidden) {
			t.Fatalf("withheld %s reads %v", k, err)
		}
	}
	if err := tab.Put(a, []byte("new"), mv(2)); err != nil {
		t.Fatal(err)
	}
	if !IsInline(slotOf(t, tab, a)) {
		t.Fatal("a's new record is not inline")
	}
	if _, _, err := lookup(mem, a); !errors.Is(err, ErrHidden) {
		t.Fatalf("a's new record reads %v before the group's end", err)
	}
	if _, err := tab.Delete(b); err != nil {
		t.Fatal(err)
	}
	tab.EndAtomic()
	mustGet(t, tab, mem, a, []byte("new"), 2)
	if _, _, err := lookup(mem, b); !errors.Is(err, errMiss) {
		t.Fatalf("b after the group: %v", err)
	}
}

// TestEvictAndResetInline: an evicted inline record turns dead at once and
// keeps its slot (rule M4) until the flag has been set for the grace
// period, then goes to arena limbo; Reset does the same for every record;
// a rebuild puts the keys back inline.
func TestEvictAndResetInline(t *testing.T) {
	t.Parallel()
	tab, mem, clk := newTable(t, 64<<10, inlineCfg)
	keys := [][]byte{[]byte("x"), []byte("y"), []byte("z")}
	for _, k := range keys {
		if err := tab.Put(k, k, mv(1)); err != nil {
			t.Fatal(err)
		}
	}
	n := InlineLen(1, 1)
	if !tab.Evict(keys[0]) {
		t.Fatal("Evict found nothing")
	}
	if _, _, err := lookup(mem, keys[0]); !errors.Is(err, ErrDead) {
		t.Fatalf("evicted key reads %v, want dead", err)
	}
	if st := tab.Stats(); st.SlotsPending != 1 || st.ArenaUsed != 3*n {
		t.Fatalf("after Evict: %+v", st)
	}
	clk.Advance(inlineCfg.Grace)
	if st := tab.Stats(); st.SlotsPending != 0 || st.ArenaUsed != 2*n || st.ArenaLimbo != n {
		t.Fatalf("after the grace period: %+v", st)
	}
	tab.SetIncomplete(false)
	tab.Reset()
	for _, k := range keys[1:] {
		if _, _, err := lookup(mem, k); !errors.Is(err, ErrDead) {
			t.Fatalf("after Reset %s reads %v, want dead", k, err)
		}
	}
	clk.Advance(inlineCfg.Grace)
	if st := tab.Stats(); st.SlotsPending != 0 || st.ArenaUsed != 0 || st.Keys != 0 {
		t.Fatalf("after Reset and the grace period: %+v", st)
	}
	for _, k := range keys {
		if err := tab.Put(k, k, mv(2)); err != nil || !IsInline(slotOf(t, tab, k)) {
			t.Fatalf("rebuild put %s: %v, word %#x", k, err, slotOf(t, tab, k))
		}
	}
	clk.Advance(tab.RevealIn())
	if err := tab.Reveal(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		mustGet(t, tab, mem, k, k, 2)
	}
}

// TestReserveInlinePut: a reserved Put that goes inline releases its
// record-area block at once; one whose arena is full uses it. Once every
// admission has ended nothing stays reserved and the bytes add up.
func TestReserveInlinePut(t *testing.T) {
	t.Parallel()
	tab, mem, _ := newTable(t, 64<<10, inlineCfg)
	a, b := []byte("a"), []byte("b")
	for _, k := range [][]byte{a, b} {
		if err := tab.Reserve(k, 10); err != nil {
			t.Fatal(err)
		}
	}
	if st := tab.Stats(); st.BytesReserved != 2*RecordLen(1, 10) || st.SlotsHeld != 2 {
		t.Fatalf("after Reserve: %+v", st)
	}
	if err := tab.Put(a, pattern(10, 1), mv(1)); err != nil || !IsInline(slotOf(t, tab, a)) {
		t.Fatalf("Put(a): %v, word %#x", err, slotOf(t, tab, a))
	}
	if st := tab.Stats(); st.BytesReserved != RecordLen(1, 10) || st.BytesUsed != 0 || st.SlotsHeld != 1 {
		t.Fatalf("after an inline Put: %+v", st)
	}
	fillArenaLimbo(tab, uint32(tab.resv["b"].held)) // b's slot is held there
	if err := tab.Put(b, pattern(10, 2), mv(1)); err != nil || IsInline(slotOf(t, tab, b)) {
		t.Fatalf("Put(b) with its arena full: %v, word %#x", err, slotOf(t, tab, b))
	}
	if st := tab.Stats(); st.BytesReserved != 0 || st.BytesUsed != RecordLen(1, 10) || st.Spills != 1 {
		t.Fatalf("after a spilled Put: %+v", st)
	}
	tab.Unreserve(a, 10)
	tab.Unreserve(b, 10)
	st := tab.Stats()
	if st.BytesReserved != 0 || st.SlotsHeld != 0 || len(tab.resv) != 0 || st.BytesUsed+st.BytesLimbo+st.BytesFree != st.BytesArea {
		t.Fatalf("after Unreserve: %+v", st)
	}
	mustGet(t, tab, mem, a, pattern(10, 1), 1)
	mustGet(t, tab, mem, b, pattern(10, 2), 1)
}

// TestInlineGraceReuse follows a superseded inline record's block through
// arena limbo: its bytes stay as they were (a reader holding the old word
// sees the record, dead) for the inline grace period, however many
// updates of the key need blocks meanwhile; only then is the block reused,
// and a reader holding the old word rejects the new record there (rule T:
// another tag), although it is the same key's, of the same length.
func TestInlineGraceReuse(t *testing.T) {
	t.Parallel()
	tab, _, clk := newTable(t, 64<<10, inlineCfg)
	k := []byte("old")
	if err := tab.Put(k, pattern(20, 1), mv(1)); err != nil {
		t.Fatal(err)
	}
	pos, w0, _ := tab.find(k, Hash(k))
	b, _ := tab.hdr.slotIndex(pos)
	stale := func() error {
		_, _, err := verInl(tab.arena(b), k, DecodeInlineSlot(w0), nil)
		return err
	}
	l0 := tab.resolve(pos, w0)
	before := append([]byte(nil), tab.block(l0)[inlineWord:]...)
	for i, d := range []time.Duration{0, inlineCfg.InlineGrace / 2, inlineCfg.InlineGrace/2 - 1} {
		clk.Advance(d)
		ver := uint64(i + 2)
		if err := tab.Put(k, pattern(20, byte(ver)), mv(ver)); err != nil {
			t.Fatal(err)
		}
		if w := slotOf(t, tab, k); DecodeInlineSlot(w).Offset == DecodeInlineSlot(w0).Offset {
			t.Fatalf("block reused %v after it was superseded", d)
		}
		if !bytes.Equal(tab.block(l0)[inlineWord:], before) || !errors.Is(stale(), ErrDead) {
			t.Fatalf("superseded record changed within the inline grace period: %v", stale())
		}
	}
	clk.Advance(1)
	// The key's other superseded blocks are younger: the next block the
	// arena gives is the first one.
	if err := tab.Put(k, pattern(20, 1), mv(1<<inlineModBits|1)); err != nil { // same bytes, same low version bits
		t.Fatal(err)
	}
	w := slotOf(t, tab, k)
	if DecodeInlineSlot(w).Offset != DecodeInlineSlot(w0).Offset {
		t.Fatal("block not reused after the inline grace period")
	}
	if err := stale(); !errors.Is(err, ErrTorn) || DecodeInlineSlot(w).Tag == DecodeInlineSlot(w0).Tag {
		t.Fatalf("stale word on the reused block: %v (tags %d, %d), want torn", err, DecodeInlineSlot(w0).Tag, DecodeInlineSlot(w).Tag)
	}
}
