package table

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero means defaults", Config{}, true},
		{"bytes per slot 16", Config{BytesPerSlot: 16}, true},
		{"bytes per slot 15", Config{BytesPerSlot: 15}, false},
		{"bytes per slot negative", Config{BytesPerSlot: -1}, false},
		{"buckets 2", Config{Buckets: 2}, true},
		{"buckets 1", Config{Buckets: 1}, false},
		{"buckets 6", Config{Buckets: 6}, false},
		{"buckets max", Config{Buckets: MaxBuckets}, true},
		{"buckets over max", Config{Buckets: MaxBuckets * 2}, false},
		{"grace 1ms", Config{Grace: time.Millisecond}, true},
		{"grace under 1ms", Config{Grace: time.Microsecond}, false},
		{"grace negative", Config{Grace: -time.Second}, false},
		{"grace too long", Config{Grace: (1 << 32) * time.Millisecond}, false},
		{"grace longest", Config{Grace: (1<<32 - 1) * time.Millisecond}, true},
		{"inline smallest", Config{InlineMax: MinInline}, true},
		{"inline largest", Config{InlineMax: MaxInline}, true},
		{"inline too small", Config{InlineMax: MinInline - 8}, false},
		{"inline too large", Config{InlineMax: MaxInline + 8}, false},
		{"inline unaligned", Config{InlineMax: 148}, false},
		{"inline negative", Config{InlineMax: -8}, false},
		{"inline grace 1ms", Config{InlineMax: 144, InlineGrace: time.Millisecond}, true},
		{"inline grace under 1ms", Config{InlineMax: 144, InlineGrace: time.Microsecond}, false},
		{"inline grace over grace", Config{InlineMax: 144, Grace: 50 * time.Millisecond, InlineGrace: 51 * time.Millisecond}, false},
		{"inline grace over default grace", Config{InlineGrace: 2 * time.Second}, false},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
	}
}

func TestFormatArenas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		cfg         Config
		bucketBytes uint32
		buckets     uint32
		igrace      uint32
	}{
		// 10*144 = 1440 bytes of arena, rounded up to 1472 (23 lines).
		{"a 144", Config{InlineMax: 144}, 64 + 1472, 256, 100},
		{"a 352, short grace", Config{InlineMax: 352, Grace: 40 * time.Millisecond}, 64 + 3520, 128, 40},
		{"explicit inline grace", Config{InlineMax: 56, InlineGrace: 7 * time.Millisecond}, 64 + 576, 512, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, mem, _ := newTable(t, 1<<20, tc.cfg)
			h, err := ParseHeader(mem)
			if err != nil {
				t.Fatal(err)
			}
			if h.BucketBytes != tc.bucketBytes || h.Buckets != tc.buckets || h.InlineMax != uint32(tc.cfg.InlineMax) ||
				h.InlineGraceMillis != tc.igrace || h.RecordBase != HeaderSize+uint64(h.Buckets)*uint64(h.BucketBytes) {
				t.Fatalf("header %+v", h)
			}
			if tab.arenas.arenaBytes != uint64(tc.bucketBytes-BucketSize) || tab.arenas.nbuckets != h.Buckets {
				t.Fatalf("arenas %d bytes x %d", tab.arenas.arenaBytes, tab.arenas.nbuckets)
			}
		})
	}
}

func TestFormatGeometry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		size    int
		cfg     Config
		buckets uint32
		end     uint64
		grace   uint32
	}{
		{"default 1 MiB", 1 << 20, Config{}, 1 << 10, 1 << 20, 1000},
		{"rounds buckets down", 1<<20 + 4096, Config{}, 1 << 10, 1<<20 + 4096, 1000},
		{"at least 2 buckets", 4096, Config{BytesPerSlot: 1 << 20}, 2, 4096, 1000},
		{"explicit buckets", 1 << 16, Config{Buckets: 8}, 8, 1 << 16, 1000},
		{"odd length", 4096 + 5, Config{Buckets: 2}, 2, 4096, 1000},
		{"grace rounds down to ms", 4096, Config{Grace: 2500 * time.Microsecond}, 4, 4096, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, mem, _ := newTable(t, tc.size, tc.cfg)
			h, err := ParseHeader(mem)
			if err != nil {
				t.Fatal(err)
			}
			// Layout 3 without arenas: buckets are their slot words alone.
			if h.Buckets != tc.buckets || h.RecordBase != HeaderSize+uint64(tc.buckets)*BucketSize ||
				h.RecordEnd != tc.end || h.GraceMillis != tc.grace || h.Version != LayoutVersion ||
				h.BucketBytes != BucketSize || h.InlineMax != 0 || h.InlineGraceMillis != tc.grace {
				t.Fatalf("header %+v", h)
			}
			if st := tab.Stats(); st.BytesFree != st.BytesArea || st.BytesArea != h.RecordEnd-h.RecordBase {
				t.Fatalf("fresh stats %+v", st)
			}
			if h.LeaseExpiry != 0 {
				t.Fatal("fresh table has a lease")
			}
		})
	}
}

func TestFormatRejects(t *testing.T) {
	t.Parallel()
	mem := mapMem(t, 4096)
	tests := []struct {
		name string
		mem  []byte
		cfg  Config
		want error
	}{
		{"empty", mem[:0], Config{}, ErrBadRegion},
		{"misaligned", mem[4:], Config{}, ErrBadRegion},
		{"too small for buckets", mem[:HeaderSize+128+24], Config{}, ErrBadRegion},
		{"buckets leave no room", mem, Config{Buckets: 64}, ErrBadRegion},
		{"bad config", mem, Config{Buckets: 3}, ErrBadConfig},
	}
	for _, tc := range tests {
		if _, err := Format(tc.mem, tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if string(mem[:8]) == Magic {
		t.Error("a failed Format wrote the header")
	}
	if _, err := Format(mem[:HeaderSize+128+MinRecord], Config{}); err != nil {
		t.Errorf("smallest table: %v", err)
	}
}

func TestFormatGenerations(t *testing.T) {
	t.Parallel()
	a, _, _ := newTable(t, 4096, Config{})
	b, _, _ := newTable(t, 4096, Config{})
	if a.Header().Generation == b.Header().Generation {
		t.Fatal("two tables share a generation")
	}
}

func TestPutGetDelete(t *testing.T) {
	t.Parallel()
	tab, mem, _ := newTable(t, 1<<20, Config{})
	type step struct {
		op      string // put, del
		key     string
		value   string
		existed bool // for del
	}
	steps := []step{
		{op: "put", key: "a", value: "1"},
		{op: "put", key: "b", value: ""},
		{op: "put", key: "a", value: "a much longer value that moves to another class"},
		{op: "del", key: "b", existed: true},
		{op: "del", key: "b", existed: false},
		{op: "put", key: "b", value: "back"},
		{op: "del", key: "never", existed: false},
		{op: "put", key: "a", value: "x"},
	}
	model := map[string]string{}
	versions := map[string]uint64{}
	for i, s := range steps {
		switch s.op {
		case "put":
			if err := tab.Put([]byte(s.key), []byte(s.value), mv(uint64(i+1))); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			model[s.key], versions[s.key] = s.value, uint64(i+1)
		case "del":
			existed, err := tab.Delete([]byte(s.key))
			if err != nil || existed != s.existed {
				t.Fatalf("step %d: Delete = %v, %v", i, existed, err)
			}
			delete(model, s.key)
		}
		checkModel(t, tab, mem, model, versions)
	}
}

// checkModel checks that the table holds exactly model, through both the
// writer's Get and a client's lookup of the region bytes.
func checkModel(t *testing.T, tab *Table, mem []byte, model map[string]string, versions map[string]uint64) {
	t.Helper()
	if tab.Len() != len(model) {
		t.Fatalf("Len = %d, want %d", tab.Len(), len(model))
	}
	for _, k := range []string{"a", "b", "never"} {
		if _, ok := model[k]; !ok {
			checkAbsent(t, tab, mem, k)
		}
	}
	for k, v := range model {
		got, m, ok, _ := tab.Get([]byte(k))
		if ver := m.Mod; !ok || string(got) != v || ver != versions[k] {
			t.Fatalf("Get(%q) = %q, %d, %v; want %q, %d", k, got, ver, ok, v, versions[k])
		}
		got, ver, err := lookup(mem, []byte(k))
		if err != nil || string(got) != v || ver != versions[k] {
			t.Fatalf("lookup(%q) = %q, %d, %v; want %q, %d", k, got, ver, err, v, versions[k])
		}
	}
}

func checkAbsent(t *testing.T, tab *Table, mem []byte, k string) {
	t.Helper()
	if _, _, ok, _ := tab.Get([]byte(k)); ok {
		t.Fatalf("Get(%q) found a deleted key", k)
	}
	if _, _, err := lookup(mem, []byte(k)); err != errMiss {
		t.Fatalf("lookup(%q) = %v, want a miss", k, err)
	}
}

func TestPutLimits(t *testing.T) {
	t.Parallel()
	tab, mem, _ := newTable(t, 4<<20, Config{})
	big := bytes.Repeat([]byte{'k'}, MaxKey)
	tests := []struct {
		name  string
		key   []byte
		value []byte
		want  error
	}{
		{"empty key", nil, []byte("v"), ErrEmptyKey},
		{"key too large", append(big, 'k'), nil, ErrKeyTooLarge},
		{"value too large", []byte("k"), make([]byte, MaxValue+1), ErrValueTooLarge},
		{"largest record", big, pattern(MaxValue, 5), nil},
	}
	for _, tc := range tests {
		err := tab.Put(tc.key, tc.value, mv(1))
		if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("%s: Put = %v, want %v", tc.name, err, tc.want)
		}
		if tc.want != nil {
			if _, err := tab.Delete(tc.key); !errors.Is(err, tc.want) && tc.want != ErrValueTooLarge {
				t.Errorf("%s: Delete = %v, want %v", tc.name, err, tc.want)
			}
		}
	}
	if v, _, err := lookup(mem, big); err != nil || !bytes.Equal(v, pattern(MaxValue, 5)) {
		t.Fatalf("largest record: %v", err)
	}
	if tab.Len() != 1 {
		t.Fatalf("Len = %d after one good put", tab.Len())
	}
}

// fillUntilFull puts keys until ErrNoSpace and returns what it stored.
func fillUntilFull(t *testing.T, tab *Table, valueLen func(i int) int) (map[string][]byte, error) {
	t.Helper()
	stored := map[string][]byte{}
	for i := 0; ; i++ {
		k := fmt.Sprintf("key-%06d", i)
		v := pattern(valueLen(i), byte(i))
		err := tab.Put([]byte(k), v, mv(uint64(i+1)))
		if err != nil {
			return stored, err
		}
		stored[k] = v
	}
}

// checkStored verifies every stored key through Get and through a client
// lookup of the region.
func checkStored(t *testing.T, tab *Table, mem []byte, stored map[string][]byte) {
	t.Helper()
	if tab.Len() != len(stored) {
		t.Fatalf("Len = %d, stored %d", tab.Len(), len(stored))
	}
	for k, v := range stored {
		if got, _, ok, _ := tab.Get([]byte(k)); !ok || !bytes.Equal(got, v) {
			t.Fatalf("Get(%q) lost its value", k)
		}
		if got, _, err := lookup(mem, []byte(k)); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("lookup(%q): %v", k, err)
		}
	}
}

func TestFullAreaLeavesTableIntact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		valueLen func(i int) int
	}{
		{"uniform", func(int) int { return 500 }},
		{"mixed", func(i int) int { return (i * 7919) % 3000 }},
		{"growing", func(i int) int { return 10 * i }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, mem, _ := newTable(t, 256<<10, Config{Buckets: 512})
			stored, err := fillUntilFull(t, tab, tc.valueLen)
			if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("fill stopped with %v", err)
			}
			if !strings.Contains(err.Error(), "no block") {
				t.Fatalf("expected the area to fill before the buckets: %v", err)
			}
			before := tab.Stats()
			snapshot := append([]byte(nil), mem...)
			// An update that needs a new block fails too, and keeps the old value.
			var some string
			for k := range stored {
				some = k
				break
			}
			if err := tab.Put([]byte(some), pattern(5000, 1), mv(1<<40)); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("update in a full area: %v", err)
			}
			if !bytes.Equal(snapshot, mem) {
				t.Fatal("a failed Put changed the region")
			}
			if after := tab.Stats(); after != before {
				t.Fatalf("a failed Put changed the stats: %+v -> %+v", before, after)
			}
			checkStored(t, tab, mem, stored)
			if before.Keys != len(stored) || before.BytesUsed+before.BytesLimbo+before.BytesFree != before.BytesArea {
				t.Fatalf("stats %+v", before)
			}
		})
	}
}

func TestFullBucketsLeaveTableIntact(t *testing.T) {
	t.Parallel()
	// Two buckets: every key's candidates are buckets 0 and 1, 16 slots.
	tab, mem, _ := newTable(t, 64<<10, Config{Buckets: 2})
	stored, err := fillUntilFull(t, tab, func(int) int { return 10 })
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "buckets") {
		t.Fatalf("fill stopped with %v", err)
	}
	if len(stored) != 2*SlotsPerBucket {
		t.Fatalf("stored %d keys in 2 buckets", len(stored))
	}
	snapshot := append([]byte(nil), mem...)
	before := tab.Stats()
	if err := tab.Put([]byte("one more"), nil, mv(99)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put into full buckets: %v", err)
	}
	if !bytes.Equal(snapshot, mem) || tab.Stats() != before {
		t.Fatal("a failed Put changed the table")
	}
	if before.BytesFree < RecordLen(8, 0) {
		t.Fatalf("area is full too (%+v); the test wants only the buckets full", before)
	}
	checkStored(t, tab, mem, stored)
	// Updates still work: they reuse the key's slot.
	for k := range stored {
		stored[k] = []byte("updated " + k)
		if err := tab.Put([]byte(k), stored[k], mv(100)); err != nil {
			t.Fatalf("update in full buckets: %v", err)
		}
	}
	checkStored(t, tab, mem, stored)
}

func TestNewKeyTakesLessLoadedBucket(t *testing.T) {
	t.Parallel()
	tab, mem, _ := newTable(t, 64<<10, Config{Buckets: 8})
	loads := func() (l [8]int) {
		for b := range uint32(8) {
			l[b], _ = tab.load(b)
		}
		return l
	}
	for i := range 40 {
		k := []byte(fmt.Sprintf("k%d", i))
		h := Hash(k)
		b1, b2 := Buckets(h, 8)
		before := loads()
		if err := tab.Put(k, nil, mv(1)); err != nil {
			t.Fatal(err)
		}
		after := loads()
		want := b1
		if before[b2] < before[b1] {
			want = b2
		}
		if after[want] != before[want]+1 {
			t.Fatalf("key %s (buckets %d:%d, %d:%d) did not go to bucket %d", k, b1, before[b1], b2, before[b2], want)
		}
		// And it sits in that bucket's first empty slot.
		pos, _, _ := tab.find(k, h)
		for p := tab.hdr.BucketOffset(want); p < pos; p += SlotSize {
			if loadWord(mem, p) == 0 {
				t.Fatalf("key %s skipped an empty slot", k)
			}
		}
	}
}

func TestLeaseAndLeaderHint(t *testing.T) {
	t.Parallel()
	tab, mem, _ := newTable(t, 4096, Config{})
	gen := tab.Header().Generation
	tests := []struct{ expiry, hint uint64 }{
		{1, 1},
		{0, 0},
		{12345678901, 3},
		{1<<64 - 1, 1<<64 - 1},
	}
	for _, tc := range tests {
		before := make([]byte, HeaderSize)
		copy(before, mem)
		tab.SetLease(tc.expiry)
		if !SameState(before, mem) {
			t.Errorf("SetLease(%d) changed more than the lease word", tc.expiry)
		}
		tab.SetLeaderHint(tc.hint)
		h, err := ParseHeader(mem)
		if err != nil {
			t.Fatal(err)
		}
		if h.LeaseExpiry != tc.expiry || h.LeaderHint != tc.hint {
			t.Errorf("lease %d hint %d, want %d %d", h.LeaseExpiry, h.LeaderHint, tc.expiry, tc.hint)
		}
		if h != tab.Header() || h.Generation != gen {
			t.Errorf("header %+v, table says %+v", h, tab.Header())
		}
	}
}

func TestSetIncomplete(t *testing.T) {
	t.Parallel()
	tab, mem, _ := newTable(t, 4096, Config{})
	for _, want := range []bool{false, true, true, false, true} {
		if want != tab.Header().Incomplete {
			tab.SetIncomplete(want)
		}
		h, err := ParseHeader(mem)
		if err != nil || h.Incomplete != want || h != tab.Header() {
			t.Fatalf("incomplete %v: parsed %+v, %v", want, h, err)
		}
		// The flag stays clear while the table is complete and is set only
		// by the rebuild itself: Reset sets it (readers must not trust a miss
		// of a region about to be refilled).
		tab.Reset()
		if h, _ := ParseHeader(mem); !h.Incomplete || h != tab.Header() {
			t.Fatalf("after Reset the header says %+v", h)
		}
		if err := tab.Reveal(); err != nil { // nothing hidden: the flag clears as it did
			t.Fatal(err)
		}
		if want != tab.Header().Incomplete {
			tab.SetIncomplete(want) // an empty table: nothing pending keeps the flag
		}
	}
}

// A flag that flips and flips back between a reader's two header reads
// must still change the header: otherwise a reader could trust a miss read
// while the region was missing keys.
func TestIncompleteFlipChangesHeader(t *testing.T) {
	t.Parallel()
	tab, mem, _ := newTable(t, 4096, Config{})
	before := make([]byte, HeaderSize)
	copy(before, mem)
	tab.SetIncomplete(true)
	tab.SetIncomplete(false)
	if SameState(before, mem) {
		t.Fatal("incomplete flag flipped and back, yet the header reads the same")
	}
	h, err := ParseHeader(mem)
	if err != nil || h.Incomplete || h.FlagEpoch != 2 {
		t.Fatalf("header %+v, %v", h, err)
	}
}

func TestCanPut(t *testing.T) {
	t.Parallel()
	tab, _, clk := newTable(t, 8<<10, Config{Buckets: 2, Grace: testGrace})
	if err := tab.Put([]byte("present"), pattern(3000, 1), mv(1)); err != nil {
		t.Fatal(err)
	}
	for i := range 2*SlotsPerBucket - 2 {
		if err := tab.Put([]byte(fmt.Sprintf("k%d", i)), nil, mv(1)); err != nil {
			t.Fatal(err)
		}
	}
	// One slot is left, and about 4 KiB of area.
	tests := []struct {
		name     string
		key      string
		valueLen int
		want     error
	}{
		{"small new key", "new", 10, nil},
		{"update", "present", 10, nil},
		{"update too large for the area", "present", 6000, ErrNoSpace},
		{"new key too large for the area", "new", 6000, ErrNoSpace},
		{"empty key", "", 1, ErrEmptyKey},
		{"key too large", strings.Repeat("k", MaxKey+1), 1, ErrKeyTooLarge},
		{"value too large", "new", MaxValue + 1, ErrValueTooLarge},
	}
	check := func() {
		for _, tc := range tests {
			err := tab.CanPut([]byte(tc.key), tc.valueLen)
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Errorf("%s: CanPut = %v, want %v", tc.name, err, tc.want)
			}
			put := tab.Put([]byte(tc.key), make([]byte, tc.valueLen), mv(2))
			if (put == nil) != (err == nil) {
				t.Errorf("%s: CanPut said %v but Put said %v", tc.name, err, put)
			}
			if put == nil && tc.key == "new" {
				if _, err := tab.Delete([]byte(tc.key)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	check()
	// Fill the last slot: new keys no longer fit, updates still do.
	if err := tab.Put([]byte("last"), nil, mv(1)); err != nil {
		t.Fatal(err)
	}
	tests[0].want = ErrNoSpace
	clk.Advance(testGrace)
	check()
}

// TestRandomOps runs random puts and deletes against a map model, checking
// the space accounting after every op and the contents at intervals, with
// and without arenas (a record is counted in the arena or the record area
// as its slot word says).
func TestRandomOps(t *testing.T) {
	t.Parallel()
	forInlineModes(t, Config{Buckets: 256, Grace: 10 * time.Millisecond}, func(t *testing.T, cfg Config, grow func(int) int) {
		tab, mem, clk := newTable(t, grow(512<<10), cfg)
		r := rand.New(rand.NewPCG(5, 6))
		model := map[string][]byte{}
		sizes := map[string]recordSize{}
		var payload, arena uint64
		var noSpace int
		keys := 150
		account := func(k string, sign int) {
			sz := sizes[k]
			if sz.inline {
				arena = uint64(int(arena) + sign*int(sz.n))
			} else {
				payload = uint64(int(payload) + sign*int(sz.n))
			}
		}
		for i := range 20000 {
			clk.Advance(time.Millisecond)
			k := fmt.Sprintf("k%d", r.IntN(keys))
			switch {
			case r.IntN(4) == 0:
				existed, err := tab.Delete([]byte(k))
				_, want := model[k]
				if err != nil || existed != want {
					t.Fatalf("Delete(%s) = %v, %v", k, existed, err)
				}
				if want {
					account(k, -1)
					delete(model, k)
				}
			default:
				v := pattern(r.IntN(4000)>>(r.IntN(2)*5), byte(i)) // half of them small
				err := tab.Put([]byte(k), v, mv(uint64(i)))
				if errors.Is(err, ErrNoSpace) {
					noSpace++
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := model[k]; ok {
					account(k, -1)
				}
				model[k] = v
				sizes[k] = sizeOf(t, tab, []byte(k), v)
				account(k, 1)
			}
			st := tab.Stats()
			if st.BytesUsed+st.BytesLimbo+st.BytesFree != st.BytesArea || st.BytesPayload != payload || st.BytesPayload > st.BytesUsed ||
				4*(st.BytesUsed-st.BytesPayload) > st.BytesPayload || st.Keys != len(model) ||
				st.ArenaUsed != arena || st.ArenaUsed+st.ArenaLimbo > st.ArenaBytes {
				t.Fatalf("op %d: stats %+v, model payload %d arena %d records %d", i, st, payload, arena, len(model))
			}
			if i%1000 == 0 {
				checkStored(t, tab, mem, model)
			}
		}
		checkStored(t, tab, mem, model)
		st := tab.Stats()
		t.Logf("%d puts hit ErrNoSpace; %d spills", noSpace, st.Spills)
		if cfg.InlineMax > 0 && (arena == 0 || st.ArenaLimbo+st.ArenaUsed == 0) {
			t.Fatalf("no record inline: %+v", st)
		}
	})
}

// recordSize is how a record is stored: its length, inline or not.
type recordSize struct {
	n      uint64
	inline bool
}

// sizeOf is how key's record (with value) is stored now, as its slot word
// says.
func sizeOf(t *testing.T, tab *Table, key, value []byte) recordSize {
	t.Helper()
	if IsInline(slotOf(t, tab, key)) {
		return recordSize{InlineLen(len(key), len(value)), true}
	}
	return recordSize{RecordLen(len(key), len(value)), false}
}
