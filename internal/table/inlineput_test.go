package table

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

// inlineCfg is a small-arena configuration: records of up to 144 bytes
// (tagged format) inline, arenas reused 10ms after retirement.
var inlineCfg = Config{Buckets: 8, Grace: 20 * time.Millisecond, InlineMax: 144, InlineGrace: 10 * time.Millisecond}

// mustGet fails unless key reads value at version, both through the
// writer's Get and a reader's lookup.
func mustGet(t *testing.T, tab *Table, mem, key, value []byte, version uint64) {
	t.Helper()
	v, ver, ok, err := tab.Get(key)
	if err != nil || !ok || ver != version || !bytes.Equal(v, value) {
		t.Fatalf("Get(%s) = %q, %d, %v, %v; want %q, %d", key, v, ver, ok, err, value, version)
	}
	v, ver, err = lookup(mem, key)
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
		if err := tab.Put(k, st.value, ver); err != nil {
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
	if s := tab.Stats(); s.ArenaUsed != 0 || s.ArenaLimbo != 0 || s.ArenaBytes != 8*1472 {
		t.Fatalf("after delete and Gi: %+v", s)
	}
}

// TestInlineOffByDefault: with InlineMax 0 no word is inline and no arena
// byte is counted.
func TestInlineOffByDefault(t *testing.T) {
	tab, _, _ := newTable(t, 64<<10, Config{Buckets: 8})
	for i := range 20 {
		if err := tab.Put([]byte(fmt.Sprint(i)), []byte("v"), 1); err != nil {
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
