package table

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

const testGrace = time.Second

// recordBytes returns a copy of the bytes behind slot word w, with the state
// word cleared so that copies taken before and after a record dies compare
// equal.
func recordBytes(mem []byte, w uint64) []byte {
	s := DecodeSlot(w)
	b := append([]byte(nil), mem[s.Offset:s.Offset+s.Len]...)
	binary.LittleEndian.PutUint32(b[recState:], 0)
	return b
}

func verifyAt(mem []byte, w uint64, key string) ([]byte, uint64, error) {
	s := DecodeSlot(w)
	return verRec(mem[s.Offset:s.Offset+s.Len], []byte(key), s)
}

// TestGraceReuse follows one superseded record's block through limbo: its
// bytes stay as they were (a reader holding the old slot sees the record,
// dead) until the grace period has passed, and only then are reused; a
// reader that lands on the reused bytes rejects them.
func TestGraceReuse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		supersede func(tab *Table) error
		reuseKey  string
		reuseLen  int // value length of the record that reuses the block
		want      error
	}{
		{"overwrite, reused by a same-length record", func(tab *Table) error {
			return tab.Put([]byte("old"), pattern(100, 2), mv(2))
		}, "new", 100, ErrKeyMismatch},
		{"delete, reused by a same-length record", func(tab *Table) error {
			_, err := tab.Delete([]byte("old"))
			return err
		}, "new", 100, ErrKeyMismatch},
		{"overwrite, reused by a shorter record of the class", func(tab *Table) error {
			return tab.Put([]byte("old"), pattern(100, 2), mv(2))
		}, "new", 90, ErrBadLength},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, mem, clk := newTable(t, 64<<10, Config{Buckets: 64, Grace: testGrace})
			if err := tab.Put([]byte("old"), pattern(100, 1), mv(1)); err != nil {
				t.Fatal(err)
			}
			w0 := slotOf(t, tab, []byte("old"))
			before := recordBytes(mem, w0)
			if err := tc.supersede(tab); err != nil {
				t.Fatal(err)
			}
			if _, _, err := verifyAt(mem, w0, "old"); !errors.Is(err, ErrDead) {
				t.Fatalf("old slot after supersede: %v, want ErrDead", err)
			}
			// Within the grace period: new records of the same class go elsewhere.
			for i, d := range []time.Duration{0, testGrace / 2, testGrace/2 - 1} {
				clk.Advance(d)
				k := fmt.Sprintf("o%02d", i)
				if err := tab.Put([]byte(k), pattern(100, 3), mv(3)); err != nil {
					t.Fatal(err)
				}
				if DecodeSlot(slotOf(t, tab, []byte(k))).Offset == DecodeSlot(w0).Offset {
					t.Fatalf("block reused %v after it was superseded", d)
				}
				if !bytes.Equal(recordBytes(mem, w0), before) {
					t.Fatal("superseded record's bytes changed within the grace period")
				}
				if _, _, err := verifyAt(mem, w0, "old"); !errors.Is(err, ErrDead) {
					t.Fatalf("old slot within grace: %v, want ErrDead", err)
				}
			}
			// Grace has passed: the block is reused.
			clk.Advance(1)
			if err := tab.Put([]byte(tc.reuseKey), pattern(tc.reuseLen, 4), mv(4)); err != nil {
				t.Fatal(err)
			}
			if DecodeSlot(slotOf(t, tab, []byte(tc.reuseKey))).Offset != DecodeSlot(w0).Offset {
				t.Fatal("block not reused after the grace period")
			}
			if _, _, err := verifyAt(mem, w0, "old"); !errors.Is(err, tc.want) {
				t.Fatalf("stale slot on reused bytes: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestLimboHoldsSpace: a full area stays full until the grace period of the
// space freed in it has passed.
func TestLimboHoldsSpace(t *testing.T) {
	t.Parallel()
	tab, mem, clk := newTable(t, 64<<10, Config{Buckets: 256, Grace: testGrace})
	stored, err := fillUntilFull(t, tab, func(int) int { return 200 })
	if !errors.Is(err, ErrNoSpace) {
		t.Fatal(err)
	}
	if _, err := tab.Delete([]byte("key-000000")); err != nil {
		t.Fatal(err)
	}
	delete(stored, "key-000000")
	block := RecordLen(10, 200) // a block is exactly its record's length
	if st := tab.Stats(); st.BytesLimbo != block {
		t.Fatalf("limbo %d after one delete, want %d", st.BytesLimbo, block)
	}
	for _, d := range []time.Duration{0, testGrace - 1} {
		clk.Advance(d)
		if err := tab.Put([]byte("late-00000"), pattern(200, 9), mv(9)); !errors.Is(err, ErrNoSpace) {
			t.Fatalf("Put with the only free block in limbo: %v", err)
		}
	}
	clk.Advance(1)
	if err := tab.Put([]byte("late-00000"), pattern(200, 9), mv(9)); err != nil {
		t.Fatalf("Put after grace: %v", err)
	}
	stored["late-00000"] = pattern(200, 9)
	if st := tab.Stats(); st.BytesLimbo != 0 {
		t.Fatalf("limbo %d after reuse", st.BytesLimbo)
	}
	checkStored(t, tab, mem, stored)
}

// TestReset: Reset flags the region, turns every record dead and
// publishes a new generation at once, but clears the slots (rule M4:
// the node still holds the keys, a rebuild puts them back) only once the
// flag has been set for the grace period; a key put back before then
// keeps its slot. The old records' bytes then wait in limbo for another
// grace period.
func TestReset(t *testing.T) {
	t.Parallel()
	tab, mem, clk := newTable(t, 256<<10, Config{Buckets: 256, Grace: testGrace})
	tab.SetLease(3<<1 | 1)
	tab.SetLeaderHint(2)
	var words []uint64
	var keys []string
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		if err := tab.Put([]byte(k), pattern(i*10, byte(i)), mv(uint64(i))); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		words = append(words, slotOf(t, tab, []byte(k)))
	}
	before := tab.Stats()
	gen := tab.Header().Generation
	pos0, _, _ := tab.find([]byte("k0"), Hash([]byte("k0")))
	tab.Reset()

	h, err := ParseHeader(mem)
	if err != nil {
		t.Fatal(err)
	}
	if h.Generation == gen || h != tab.Header() || !h.Incomplete || h.LeaseExpiry != 3<<1|1 || h.LeaderHint != 2 {
		t.Fatalf("header after Reset %+v (old generation %#x)", h, gen)
	}
	if tab.Len() != 0 {
		t.Fatalf("Len = %d after Reset", tab.Len())
	}
	// Within the grace period: every slot stays, naming its dead record (a
	// reader retries, and never proves a miss), and the bytes stay used.
	for _, d := range []time.Duration{0, testGrace - 1} {
		clk.Advance(d)
		st := tab.Stats()
		if st.SlotsPending != len(keys) || st.BytesUsed != before.BytesUsed || st.BytesLimbo != 0 || tab.PendingClearsIn() != testGrace-d {
			t.Fatalf("%v after Reset: stats %+v, slots clear in %v", d, st, tab.PendingClearsIn())
		}
		for i, k := range keys {
			if _, _, err := lookup(mem, []byte(k)); slotOf(t, tab, []byte(k)) != words[i] || !errors.Is(err, ErrDead) {
				t.Fatalf("%v after Reset: %s reads %v, slot %#x (was %#x)", d, k, err, slotOf(t, tab, []byte(k)), words[i])
			}
			if _, _, ok, err := tab.Get([]byte(k)); ok || err != nil {
				t.Fatalf("Get(%s) of a reset key: %v %v", k, ok, err)
			}
		}
		tab.SetIncomplete(false) // refused: slots are pending
		if !tab.Header().Incomplete {
			t.Fatalf("%v after Reset: flag cleared while slots wait", d)
		}
	}
	// A rebuild's Put of a key whose slot waits updates it in place.
	if err := tab.Put([]byte("k0"), []byte("again"), mv(7)); err != nil {
		t.Fatal(err)
	}
	if pos, w, _ := tab.find([]byte("k0"), Hash([]byte("k0"))); pos != pos0 || w == words[0] || tab.Len() != 1 {
		t.Fatalf("k0 put back at slot %d (was %d), word %#x (was %#x), Len %d", pos, pos0, w, words[0], tab.Len())
	}
	// The grace period has passed since the flag was set: the rest clear.
	clk.Advance(1)
	st := tab.Stats()
	if st.SlotsPending != 0 || st.BytesLimbo != before.BytesUsed || st.Keys != 1 || tab.PendingClearsIn() != 0 {
		t.Fatalf("stats a grace period after Reset %+v, before %+v", st, before)
	}
	for i, k := range keys[1:] {
		checkAbsent(t, tab, mem, k)
		if _, _, err := verifyAt(mem, words[i+1], k); !errors.Is(err, ErrDead) {
			t.Fatalf("old record %s after its slot cleared: %v", k, err)
		}
	}
	// The rebuild's record stays hidden until Reveal.
	if _, _, err := lookup(mem, []byte("k0")); !errors.Is(err, ErrHidden) {
		t.Fatalf("lookup before Reveal: %v, want hidden", err)
	}
	if err := tab.Reveal(); err != nil {
		t.Fatal(err)
	}
	if v, ver, err := lookup(mem, []byte("k0")); err != nil || string(v) != "again" || ver != 7 {
		t.Fatalf("lookup after rebuild: %q %d %v", v, ver, err)
	}
	if tab.SetIncomplete(false); tab.Header().Incomplete {
		t.Fatal("flag still set with nothing pending")
	}
	// Once empty and past grace, the whole area is free again (a Reset of
	// a region flagged incomplete for the grace period clears at once).
	clk.Advance(testGrace)
	tab.SetIncomplete(true)
	clk.Advance(testGrace)
	tab.Reset()
	clk.Advance(testGrace)
	if st := tab.Stats(); st.BytesFree != st.BytesArea || st.BytesLimbo != 0 || st.BytesUsed != 0 || st.SlotsPending != 0 {
		t.Fatalf("stats after Reset and grace %+v", st)
	}
}

// expectedValue is the value the churn tests write for key at version: a
// reader that accepts a (value, version) pair can check it was really
// written.
func expectedValue(key string, version uint64) []byte {
	return valueUpTo(key, version, 3000)
}

// valueUpTo is expectedValue shorter than max bytes.
func valueUpTo(key string, version uint64, max int) []byte {
	n := int(Hash([]byte(fmt.Sprint(key, version))) % uint64(max))
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(version) + byte(i) + key[len(key)-1]
	}
	return v
}

// TestStaleSlotsNeverAcceptWrongValue keeps slot words long after their
// records were superseded and their blocks reused, and checks that
// verifying one either fails or yields a value really written for that key.
// Some reads are split around a writer op, so that the bytes are half from
// before and half from after it (a torn READ). With arenas (small values,
// most inline), a stale inline word is verified against its bucket's
// arena as read, by its tag.
func TestStaleSlotsNeverAcceptWrongValue(t *testing.T) {
	t.Parallel()
	forInlineModes(t, Config{Buckets: 128, Grace: 5 * time.Millisecond}, func(t *testing.T, cfg Config, grow func(int) int) {
		staleSlots(t, grow(256<<10), cfg)
	})
}

// staleSlot is a slot word a reader kept, and where it was.
type staleSlot struct {
	key    string
	pos, w uint64
}

// staleBytes is what a READ of what s names covers: the record, or for an
// inline word its bucket's whole arena.
func staleBytes(h Header, s staleSlot) (off, n uint64) {
	if IsInline(s.w) {
		b, _ := h.slotIndex(s.pos)
		return h.BucketOffset(b) + BucketSize, uint64(h.BucketBytes - BucketSize)
	}
	d := DecodeSlot(s.w)
	return d.Offset, d.Len
}

func staleSlots(t *testing.T, size int, cfg Config) {
	tab, mem, clk := newTable(t, size, cfg)
	value := expectedValue
	if cfg.InlineMax > 0 {
		value = smallValue
	}
	r := rand.New(rand.NewPCG(7, 8))
	var old []staleSlot
	counts := map[error]int{}
	check := func(s staleSlot, b []byte) {
		var v []byte
		var version uint64
		var err error
		if IsInline(s.w) {
			v, version, err = verInl(b, []byte(s.key), DecodeInlineSlot(s.w), nil)
		} else {
			v, version, err = verRec(b, []byte(s.key), DecodeSlot(s.w))
		}
		if err == nil && !bytes.Equal(v, value(s.key, version)) {
			t.Fatalf("stale slot of %s accepted a wrong value at version %d", s.key, version)
		}
		counts[err]++
	}
	buf := make([]byte, MaxRecord)
	for v := uint64(1); v <= 20000; v++ {
		clk.Advance(time.Millisecond)
		k := fmt.Sprintf("key%d", r.IntN(60))
		// Start a torn read of some old or current slot.
		var torn staleSlot
		if len(old) > 0 {
			torn = old[r.IntN(len(old))]
		}
		tornOff, tornLen := staleBytes(tab.hdr, torn)
		tornRec := buf[:tornLen]
		half := len(tornRec) / 2 &^ 7
		copy(tornRec[:half], mem[tornOff:])

		if r.IntN(10) == 0 {
			if _, err := tab.Delete([]byte(k)); err != nil {
				t.Fatal(err)
			}
		} else {
			if pos, w, ok := tab.find([]byte(k), Hash([]byte(k))); ok {
				old = append(old, staleSlot{k, pos, w})
			}
			if err := tab.Put([]byte(k), value(k, v), mv(v)); err != nil && !errors.Is(err, ErrNoSpace) {
				t.Fatal(err)
			}
		}

		if torn.w != 0 {
			copy(tornRec[half:], mem[tornOff+uint64(half):tornOff+tornLen])
			check(torn, tornRec)
		}
		for range 3 {
			if len(old) > 0 {
				s := old[r.IntN(len(old))]
				off, n := staleBytes(tab.hdr, s)
				check(s, mem[off:off+n])
			}
		}
	}
	t.Logf("stale verifications: %v; %+v", counts, tab.Stats())
	for _, want := range []error{ErrDead, ErrKeyMismatch, ErrBadLength, ErrTorn} {
		if counts[want] == 0 {
			t.Errorf("no stale read ended in %v; the test did not exercise reuse", want)
		}
	}
}
