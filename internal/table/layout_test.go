package table

import (
	"encoding/binary"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docSection returns the text of docs/layout.md from the heading that starts
// with title to the next heading of the same level.
func docSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/layout.md")
	if err != nil {
		t.Fatalf("read layout doc: %v", err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## "+title)
	if i < 0 {
		t.Fatalf("layout doc has no section %q", title)
	}
	rest := doc[i+1:]
	if j := strings.Index(rest[3:], "\n## "); j >= 0 {
		rest = rest[:j+3]
	}
	return rest
}

// docRows returns the table rows "| a | b | c |..." of a doc section as
// trimmed cells.
func docRows(section string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows[1:] // drop the column titles
}

type field struct{ off, size int }

// reserved2 is the doc's second "reserved" row of the header (after the
// revision word): checkFields takes a repeated name as name+"2".
const reserved2 = "reserved2"

func TestDocHeaderFields(t *testing.T) {
	t.Parallel()
	want := map[string]field{
		"magic":          {offMagic, 8},
		"version":        {offVersion, 4},
		"slotsPerBucket": {offSlots, 2},
		"flags":          {offFlags, 2},
		"nbuckets":       {offBuckets, 4},
		"graceMillis":    {offGrace, 4},
		"recordBase":     {offRecordBase, 8},
		"recordEnd":      {offRecordEnd, 8},
		"lease":          {offLease, 8},
		"leaderHint":     {offLeaderHint, 8},
		"generation":     {offGeneration, 8},
		// Layouts 3 and 4.
		"bucketBytes":       {offBucketBytes, 4},
		"inlineGraceMillis": {offInlineGrace, 4},
		"inlineMax":         {offInlineMax, 4},
		"reserved":          {offReserved, offRevision - offReserved},
		"revision":          {offRevision, 8},
		reserved2:           {offRevision + 8, HeaderSize - offRevision - 8},
	}
	checkFields(t, docRows(docSection(t, "Header")), want, HeaderSize)
}

func TestDocRecordFields(t *testing.T) {
	t.Parallel()
	want := map[string]field{
		"crc":      {recCRC, 4},
		"state":    {recState, 4},
		"meta":     {recMeta, 32},
		"keyLen":   {recKeyLen, 2},
		"valueLen": {recValueLen, 4},
		"reserved": {recReserved, 2},
	}
	rows := docRows(docSection(t, "Records"))
	var fixed [][]string
	for _, r := range rows {
		if _, err := strconv.Atoi(r[1]); err == nil {
			fixed = append(fixed, r)
		}
	}
	checkFields(t, fixed, want, RecordHeaderSize)
	if key := rows[len(fixed)]; key[0] != strconv.Itoa(RecordHeaderSize) || key[2] != "key" {
		t.Errorf("doc: key row %q, want the key at offset %d", key, RecordHeaderSize)
	}
}

// checkFields compares doc rows (off | size | name | ...) with want, and
// checks that the fields tile [0, total).
func checkFields(t *testing.T, rows [][]string, want map[string]field, total int) {
	t.Helper()
	next := 0
	for _, r := range rows {
		off, err1 := strconv.Atoi(r[0])
		size, err2 := strconv.Atoi(r[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("doc row %q: bad numbers", r)
		}
		name := r[2]
		if _, seen := want[name]; !seen {
			if _, again := want[name+"2"]; again {
				name += "2"
			}
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("doc field %q is unknown to the code", r[2])
			continue
		}
		delete(want, name)
		if (field{off, size}) != w {
			t.Errorf("doc field %s at %d size %d, code has %d size %d", r[2], off, size, w.off, w.size)
		}
		if off != next {
			t.Errorf("doc field %s at %d, want %d (fields must tile)", r[2], off, next)
		}
		next = off + size
	}
	if next != total {
		t.Errorf("doc fields end at %d, want %d", next, total)
	}
	for name := range want {
		t.Errorf("code field %s missing from the doc", name)
	}
}

func TestDocSlotBits(t *testing.T) {
	t.Parallel()
	want := map[string][2]int{
		"record offset": {0, slotOffBits - 1},
		"record length": {slotOffBits, slotOffBits + slotLenBits - 1},
		"kind":          {slotKindShift, slotKindShift},
		"fingerprint":   {slotFPShift, 63},
		// The inline kind's table.
		"arena offset":  {0, inlineOffBits - 1},
		"inline length": {inlineOffBits, inlineTagPos - 1},
		"tag":           {inlineTagPos, inlineModPos - 1},
		"mod":           {inlineModPos, inlineModPos + inlineModBits - 1},
	}
	for _, r := range docRows(docSection(t, "Slots")) {
		if r[0] == "bits" { // the inline kind's table starts
			continue
		}
		lo, hi, err := parseBits(r[0])
		if err != nil {
			t.Fatalf("doc slot row %q: %v", r, err)
		}
		for name, bits := range want {
			if strings.HasPrefix(r[1], name) {
				if bits != [2]int{lo, hi} {
					t.Errorf("doc: %s in bits %d-%d, code uses %d-%d", name, lo, hi, bits[0], bits[1])
				}
				delete(want, name)
			}
		}
	}
	for name := range want {
		t.Errorf("doc: slot field %q missing", name)
	}
}

var bitRange = regexp.MustCompile(`^(\d+)-(\d+)$`)

// parseBits parses a doc bit range "lo-hi".
func parseBits(s string) (lo, hi int, err error) {
	m := bitRange.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, errors.New("want lo-hi")
	}
	lo, _ = strconv.Atoi(m[1])
	hi, _ = strconv.Atoi(m[2])
	return lo, hi, nil
}

// TestDocNumbers checks the numbers the doc states in prose.
func TestDocNumbers(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/layout.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, c := range []struct {
		phrase string
		ok     bool
	}{
		{"(layout version " + strconv.Itoa(LayoutVersion) + ")", true},
		{"| 0  | 8 | magic | `\"" + Magic + "\"` |", true},
		{"| header (" + strconv.Itoa(HeaderSize) + " B)", true},
		{"## Header (" + strconv.Itoa(HeaderSize) + " bytes)", true},
		{"its header is the first\n" + strconv.Itoa(HeaderSize2) + " bytes below (same offsets, version " + strconv.Itoa(LayoutVersion2) + ")", true},
		{"a bucket's first 64 B are " + strconv.Itoa(SlotsPerBucket) + " slots of " + strconv.Itoa(SlotSize) + " B", BucketSize == 64},
		{"Its slot\nwords are its first 64 bytes", BucketSize == 64},
		{"**With `Config.InlineMax` 0 (`--table-inline off`) kvd writes bucketBytes\n64**", newHeader(2, Config{}.withDefaults(), 1<<20).BucketBytes == 64 && newHeader(2, Config{}.withDefaults(), 1<<20).InlineMax == 0},
		{"(3,904 for kvd's default 384)", Config{InlineMax: 384}.bucketBytes() == 3904},
		{"`8·(1+⌈(38+32+256)/7⌉)` = 384", InlineLen(32, 256) == 384},
		{"7,808 B with kvd's default 384", 2*Config{InlineMax: 384}.bucketBytes() == 7808},
		{"(graceMillis when there are no arenas; `Config.InlineGrace`, default 100 ms)",
			newHeader(2, Config{Grace: 7 * time.Millisecond}.withDefaults(), 1<<20).InlineGraceMillis == 7 &&
				newHeader(2, Config{InlineMax: 64}.withDefaults(), 1<<20).InlineGraceMillis == 100},
		{"else 64 + 10*inlineMax rounded up to a multiple of 64", Config{InlineMax: 144}.bucketBytes() == 64+1472 && Config{InlineMax: 64}.bucketBytes() == 64+640},
		{"an **arena** of\n`10*a` bytes", arenaRecords == 10},
		// Inline records.
		{"`8*(1 + ceil((38 + keyLen +\nvalueLen) / 7))`", InlineLen(16, 16) == 88 && InlineLen(1, 0) == MinInline && format4.inlineHead() == 38},
		{"layout 3's was `8*(1 + ceil((14 + keyLen + valueLen) / 7))`", format3.inlineLen(16, 16) == 64 && format3.inlineHead() == 14},
		{"| 0 | crc: CRC-32C of the padded payload | state (0 live, 1 dead, 2 hidden) | 0 | tag |", inlineZero == 6 && inlineTagByte == 7 && recState == 4},
		{"smallest value in 1-255 that no word of the block holds", chooseTag(make([]byte, 16)) == 1},
		{"(at most 254 words, so one is free)", MaxInline/inlineWord == 254},
		{"| 12-19 | inline length / 8 (up to 2040 B) |", (1<<inlineLenBits-1)*inlineWord == 2040},
		{"| 28-50 | mod, its low 23 bits:", inlineModBits == 23},
		{"`Stats.ArenaBytes` (all arenas), `ArenaUsed`", true},
		{"at most 2032", MaxInline == 2032},
		{"bucketBytes - 64 >= 8*inlineMax", true},
		{"Bucket b starts at `128 + b*bucketBytes` (layout 2: `64 + b*64`)",
			(Header{Version: LayoutVersion, BucketBytes: 192}).BucketOffset(3) == 128+3*192 &&
				(Header{Version: LayoutVersion2, BucketBytes: 64}).BucketOffset(3) == 64+3*64},
		{"| keyLen | 1..1024 |", MaxKey == 1024},
		{"| valueLen | 0..1 MiB |", MaxValue == 1<<20},
		{"first 32 GiB", MaxArea == 32<<30},
		{"records up to 4 MiB", (1<<slotLenBits)*RecordAlign == 4<<20},
		{"padding to a multiple of 8", RecordAlign == 8},
		{"xxHash64 (seed 0)", Hash(nil) == 0xef46db3751d8e999},
		{"CRC-32C (Castagnoli) of bytes 8..len", recMeta == 8},
		{"Layout 3's records have an 8-byte `version` at 8 where layout 4 has meta, so its keyLen is at 16 and its key at 24", format3.keyLenAt() == 16 && format3.keyAt() == 24},
		{"| 80 | 8 | revision |", offRevision == 80},
		{"| slotsPerBucket | 8 |", SlotsPerBucket == 8},
		{"| flags | bit 0: incomplete; bits 1-15: a count of its changes", flagIncomplete == 1 && flagEpochShift == 1},
		{"| nbuckets | power of two, 2 to 2^28 |", MaxBuckets == 1<<28},
		{"at least recordBase + 56 (layouts 2 and 3: 32)", MinRecord == 56 && format3.recordLen(1, 0) == 32},
		{"= 128 + nbuckets*bucketBytes", newHeader(4, Config{}.withDefaults(), 1<<20).RecordBase == 128+4*64},
		{"`recordBase = 64 + nbuckets*64`", (Header{Version: LayoutVersion2, BucketBytes: 64}).BucketOffset(4) == 64+4*64},
		// Placement (writer policy).
		{"cuckoo hashing with 8-slot buckets", SlotsPerBucket == 8},
		{"Everyday writes look at\nmost 512 buckets", searchLimit == 512},
		{"fewer than 15/16 of the\nslots", KeyCapacity(16) == 16*8*15/16 && KeyCapacity(1024) == 1024*8*15/16},
		{"stores the key's slot word into an empty slot of\nits other bucket, then stores 0 into its old slot", true},
		{"A record gets a block of exactly its own length", true},
	} {
		if !strings.Contains(doc, c.phrase) {
			t.Errorf("doc does not say %q", c.phrase)
		}
		if !c.ok {
			t.Errorf("code disagrees with doc phrase %q", c.phrase)
		}
	}
	if MaxRecord > (1<<slotLenBits-1)*RecordAlign {
		t.Errorf("MaxRecord %d does not fit a slot's length field", MaxRecord)
	}
}

func TestParseHeaderFormatted(t *testing.T) {
	t.Parallel()
	tab, mem, _ := newTable(t, 1<<20, Config{BytesPerSlot: 256})
	h, err := ParseHeader(mem)
	if err != nil {
		t.Fatal(err)
	}
	if h != tab.Header() {
		t.Fatalf("parsed %+v, table says %+v", h, tab.Header())
	}
	want := Header{
		Version:           LayoutVersion,
		Buckets:           1 << 20 / (8 * 256),
		GraceMillis:       1000,
		RecordBase:        HeaderSize + 64*(1<<20/(8*256)),
		RecordEnd:         1 << 20,
		Generation:        h.Generation,
		BucketBytes:       BucketSize,
		InlineGraceMillis: 1000,
	}
	if h != want || h.Generation == 0 || h.Grace() != DefaultGrace {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	if string(mem[:8]) != Magic || binary.LittleEndian.Uint32(mem[8:]) != LayoutVersion {
		t.Fatalf("magic/version bytes % x", mem[:12])
	}
}

func TestParseHeaderErrors(t *testing.T) {
	t.Parallel()
	_, mem, _ := newTable(t, 1<<16, Config{Buckets: 64})
	good := append([]byte(nil), mem[:HeaderSize]...)
	le := binary.LittleEndian
	tests := append([]headerCase{
		{"good", func(b []byte) []byte { return b }, nil},
		{"short", func(b []byte) []byte { return b[:HeaderSize-1] }, ErrBadHeader},
		{"zero", func(b []byte) []byte { return make([]byte, HeaderSize) }, ErrBadHeader},
		{"magic", func(b []byte) []byte { b[3] ^= 1; return b }, ErrBadHeader},
		{"version 1", func(b []byte) []byte { le.PutUint32(b[offVersion:], 1); return b }, ErrLayoutVersion},
		{"slots 4", func(b []byte) []byte { le.PutUint16(b[offSlots:], 4); return b }, ErrBadHeader},
		{"flag epoch", func(b []byte) []byte { le.PutUint16(b[offFlags:], 2); return b }, nil},
		{"incomplete flag", func(b []byte) []byte { le.PutUint16(b[offFlags:], 1); return b }, nil},
		{"buckets 1", func(b []byte) []byte { le.PutUint32(b[offBuckets:], 1); return b }, ErrBadHeader},
		{"buckets 48", func(b []byte) []byte { le.PutUint32(b[offBuckets:], 48); return b }, ErrBadHeader},
		{"buckets 32 (base mismatch)", func(b []byte) []byte { le.PutUint32(b[offBuckets:], 32); return b }, ErrBadHeader},
		{"buckets too many", func(b []byte) []byte { le.PutUint32(b[offBuckets:], 1<<31); return b }, ErrBadHeader},
		{"grace 0", func(b []byte) []byte { le.PutUint32(b[offGrace:], 0); return b }, ErrBadHeader},
		{"base moved", func(b []byte) []byte { le.PutUint64(b[offRecordBase:], HeaderSize+64*64+8); return b }, ErrBadHeader},
		{"end unaligned", func(b []byte) []byte { le.PutUint64(b[offRecordEnd:], 1<<16-4); return b }, ErrBadHeader},
		{"end below base", func(b []byte) []byte { le.PutUint64(b[offRecordEnd:], 64); return b }, ErrBadHeader},
		{"end leaves no record", func(b []byte) []byte { le.PutUint64(b[offRecordEnd:], HeaderSize+64*64+48); return b }, ErrBadHeader},
		{"end past 32 GiB", func(b []byte) []byte { le.PutUint64(b[offRecordEnd:], MaxArea+8); return b }, ErrBadHeader},
		{"generation 0", func(b []byte) []byte { le.PutUint64(b[offGeneration:], 0); return b }, ErrBadHeader},
		{"lease and hint are free", func(b []byte) []byte {
			le.PutUint64(b[offLease:], ^uint64(0))
			le.PutUint64(b[offLeaderHint:], 7)
			return b
		}, nil},
	}, append(v3HeaderCases(), v2HeaderCases()...)...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(append([]byte(nil), good...))
			_, err := ParseHeader(b)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// headerCase mutates a good layout 4 header of 64 buckets, grace 1000 ms,
// recordEnd 64 KiB (TestParseHeaderErrors), and says what ParseHeader
// must answer.
type headerCase struct {
	name   string
	mutate func(b []byte) []byte
	want   error
}

// withArenas gives b's header arenas: bucketBytes bb, inlineMax a, and the
// recordBase (and a recordEnd past it) they imply, so that only the check
// under test can fail.
func withArenas(b []byte, bb, a uint32) []byte {
	le := binary.LittleEndian
	le.PutUint32(b[offBucketBytes:], bb)
	le.PutUint32(b[offInlineMax:], a)
	base := HeaderSize + 64*uint64(bb)
	le.PutUint64(b[offRecordBase:], base)
	le.PutUint64(b[offRecordEnd:], base+4096)
	return b
}

// v3HeaderCases: layout 3 and 4's own fields and their cross-checks.
func v3HeaderCases() []headerCase {
	le := binary.LittleEndian
	u32 := func(off int, v uint32) func(b []byte) []byte {
		return func(b []byte) []byte { le.PutUint32(b[off:], v); return b }
	}
	arenas := func(bb, a uint32) func(b []byte) []byte {
		return func(b []byte) []byte { return withArenas(b, bb, a) }
	}
	return []headerCase{
		{"v3 cut to 64 bytes", func(b []byte) []byte { return b[:HeaderSize2] }, ErrBadHeader},
		{"v3 cut to 127 bytes", func(b []byte) []byte { return b[:HeaderSize-1] }, ErrBadHeader},
		{"version 5", u32(offVersion, 5), ErrLayoutVersion},
		{"version 3", u32(offVersion, LayoutVersion3), nil},
		{"revision is free", func(b []byte) []byte { le.PutUint64(b[offRevision:], ^uint64(0)); return b }, nil},
		{"version 3 with a revision", func(b []byte) []byte { // layout 3's reserved bytes
			le.PutUint32(b[offVersion:], LayoutVersion3)
			le.PutUint64(b[offRevision:], 1)
			return b
		}, ErrBadHeader},
		{"reserved before the revision", func(b []byte) []byte { b[offRevision-1] = 1; return b }, ErrBadHeader},
		{"reserved after the revision", func(b []byte) []byte { b[offRevision+8] = 1; return b }, ErrBadHeader},
		{"bucketBytes 0", u32(offBucketBytes, 0), ErrBadHeader},
		{"bucketBytes 32", arenas(32, 0), ErrBadHeader},
		{"bucketBytes 0 with inlineMax", arenas(0, 8), ErrBadHeader},     // bucketBytes-64 must not wrap
		{"bucketBytes not whole lines", arenas(2*64+8, 8), ErrBadHeader}, // the arena would hold 9 of a
		{"inlineMax without arenas", u32(offInlineMax, 8), ErrBadHeader},
		{"arenas without inlineMax", arenas(128, 0), ErrBadHeader},
		{"arenas, base as without", func(b []byte) []byte {
			withArenas(b, 128, 8)
			le.PutUint64(b[offRecordBase:], HeaderSize+64*64)
			return b
		}, ErrBadHeader},
		{"arenas, base as layout 2", func(b []byte) []byte {
			withArenas(b, 128, 8)
			le.PutUint64(b[offRecordBase:], HeaderSize2+64*128)
			return b
		}, ErrBadHeader},
		{"arena holds 8 of inlineMax", arenas(128, 8), nil},
		{"arena holds fewer than 8", arenas(128, 16), ErrBadHeader},
		{"inlineMax unaligned", arenas(128, 4), ErrBadHeader},
		{"inlineMax 2032", arenas(64+8*2048, 2032), nil},
		{"inlineMax 2040", arenas(64+8*2048, 2040), ErrBadHeader},
		{"arena as large as a slot word addresses", arenas(64+MaxArenaBytes, 8), nil},
		// A reader sizes its bucket buffers by bucketBytes: a hostile header
		// must not make it allocate gigabytes.
		{"arena larger than a slot word addresses", arenas(64+MaxArenaBytes+64, 8), ErrBadHeader},
		{"inlineGrace 0", u32(offInlineGrace, 0), ErrBadHeader},
		{"inlineGrace 1", u32(offInlineGrace, 1), nil},
		{"inlineGrace above grace", u32(offInlineGrace, 1001), ErrBadHeader},
		{"reserved first byte", func(b []byte) []byte { b[offReserved] = 1; return b }, ErrBadHeader},
		{"reserved last byte", func(b []byte) []byte { b[HeaderSize-1] = 0x80; return b }, ErrBadHeader},
	}
}

// asLayout2 rewrites b, a layout 3 header without arenas, into the layout
// 2 header of the same geometry, and fills the 64 bytes after it (bucket
// 0's slots in a layout 2 region) with words a header check must ignore.
func asLayout2(b []byte) []byte {
	le := binary.LittleEndian
	n := uint64(le.Uint32(b[offBuckets:]))
	le.PutUint32(b[offVersion:], LayoutVersion2)
	le.PutUint64(b[offRecordBase:], HeaderSize2+n*BucketSize)
	for i := HeaderSize2; i < HeaderSize; i += SlotSize {
		le.PutUint64(b[i:], Slot{Offset: 1 << 20, Len: 64, FP: uint16(i)}.Word())
	}
	return b
}

// v2HeaderCases: layout 2 headers, built by hand, still parse.
func v2HeaderCases() []headerCase {
	le := binary.LittleEndian
	return []headerCase{
		{"v2", asLayout2, nil},
		{"v2 alone", func(b []byte) []byte { return asLayout2(b)[:HeaderSize2] }, nil},
		{"v2 short", func(b []byte) []byte { return asLayout2(b)[:HeaderSize2-1] }, ErrBadHeader},
		{"v2 with layout 3's base", func(b []byte) []byte {
			asLayout2(b)
			le.PutUint64(b[offRecordBase:], HeaderSize+64*64)
			return b
		}, ErrBadHeader},
	}
}

func TestParseHeaderLayout2(t *testing.T) {
	t.Parallel()
	_, mem, _ := newTable(t, 1<<16, Config{Buckets: 64, Grace: 1500 * time.Millisecond})
	v3, err := ParseHeader(mem)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader(asLayout2(append([]byte(nil), mem[:HeaderSize]...)))
	if err != nil {
		t.Fatal(err)
	}
	want := v3
	want.Version, want.RecordBase = LayoutVersion2, HeaderSize2+64*BucketSize
	if h != want {
		t.Fatalf("layout 2 header %+v, want %+v", h, want)
	}
	if h.Len() != HeaderSize2 || h.BucketOffset(0) != HeaderSize2 || h.BucketOffset(63)+BucketSize != h.RecordBase ||
		h.BucketBytes != BucketSize || h.InlineMax != 0 || h.InlineGraceMillis != 1500 {
		t.Fatalf("layout 2 geometry: %+v", h)
	}
	if h.SameGeometry(v3) {
		t.Fatal("layout 2 and 3 headers of one region share a geometry")
	}
}

// TestSameStateLength: SameState compares a header's own bytes, except the
// lease and (layout 4) the revision, which every write advances: for
// layout 2 the 64 bytes after it are bucket 0's slots, which change with
// no change of state; for layouts 3 and 4 they are header fields.
func TestSameStateLength(t *testing.T) {
	t.Parallel()
	_, mem, _ := newTable(t, 1<<16, Config{Buckets: 64})
	v3 := append([]byte(nil), mem[:HeaderSize]...)
	v2 := asLayout2(append([]byte(nil), v3...))
	for _, tc := range []struct {
		name string
		base []byte
		off  int
		same bool
	}{
		{"v2 lease", v2, offLease + 3, true},
		{"v2 generation", v2, offGeneration, false},
		{"v2 bucket 0 first slot", v2, HeaderSize2, true},
		{"v2 bucket 0 last slot", v2, HeaderSize - 1, true},
		{"v3 lease", v3, offLease, true},
		{"v3 bucketBytes", v3, offBucketBytes, false},
		{"v3 inlineMax", v3, offInlineMax + 1, false},
		{"v3 reserved", v3, HeaderSize - 1, false},
		{"v4 revision", v3, offRevision, true},
		{"v4 revision, high byte", v3, offRevision + 7, true},
		{"v4 reserved before the revision", v3, offRevision - 1, false},
		{"v4 reserved after the revision", v3, offRevision + 8, false},
	} {
		b := append([]byte(nil), tc.base...)
		b[tc.off] ^= 0x40
		if got := SameState(tc.base, b); got != tc.same {
			t.Errorf("%s: SameState = %v, want %v", tc.name, got, tc.same)
		}
		if got := SameState(b, tc.base); got != tc.same {
			t.Errorf("%s (swapped): SameState = %v, want %v", tc.name, got, tc.same)
		}
	}
	if SameState(v2, v3) || SameState(v3, v2) {
		t.Error("a layout 2 and a layout 3 header show the same state")
	}
}

func TestHeaderInArea(t *testing.T) {
	t.Parallel()
	h := Header{Buckets: 2, RecordBase: 192, RecordEnd: 1024}
	tests := []struct {
		s    Slot
		want bool
	}{
		{Slot{Offset: 192, Len: 32}, true},
		{Slot{Offset: 992, Len: 32}, true},
		{Slot{Offset: 192, Len: 832}, true},
		{Slot{Offset: 1000, Len: 32}, false},   // runs past the end
		{Slot{Offset: 184, Len: 32}, false},    // in the buckets
		{Slot{Offset: 192, Len: 24}, false},    // shorter than any record
		{Slot{Offset: 192, Len: 840}, false},   // longer than the area
		{Slot{Offset: 0, Len: 1 << 23}, false}, // longer than any record
		{Slot{Offset: 192, Len: 32, Inline: true}, false},
		{Slot{}, false},
	}
	for _, tc := range tests {
		if got := h.InArea(tc.s); got != tc.want {
			t.Errorf("InArea(%+v) = %v, want %v", tc.s, got, tc.want)
		}
	}
	if (Header{}).InArea(Slot{Offset: 0, Len: 32}) {
		t.Error("zero header holds a record")
	}
}

// TestSameGeometryFields: a header that differs in any field that
// addresses the region is another geometry; the lease and flags are not.
func TestSameGeometryFields(t *testing.T) {
	t.Parallel()
	g := Header{Version: LayoutVersion, Buckets: 4, GraceMillis: 10, RecordBase: 128 + 4*128, RecordEnd: 4096,
		Generation: 1, BucketBytes: 128, InlineGraceMillis: 5, InlineMax: 8}
	for name, change := range map[string]func(h *Header){
		"version":     func(h *Header) { h.Version = LayoutVersion2 },
		"buckets":     func(h *Header) { h.Buckets = 8 },
		"grace":       func(h *Header) { h.GraceMillis++ },
		"base":        func(h *Header) { h.RecordBase += 64 },
		"end":         func(h *Header) { h.RecordEnd -= 8 },
		"generation":  func(h *Header) { h.Generation++ },
		"bucketBytes": func(h *Header) { h.BucketBytes += 64 },
		"inlineGrace": func(h *Header) { h.InlineGraceMillis++ },
		"inlineMax":   func(h *Header) { h.InlineMax += 8 },
	} {
		h := g
		change(&h)
		if h.SameGeometry(g) || g.SameGeometry(h) {
			t.Errorf("a different %s is the same geometry", name)
		}
	}
	h := g
	h.LeaseExpiry, h.LeaderHint, h.Incomplete, h.FlagEpoch = 9, 2, true, 3
	if !h.SameGeometry(g) {
		t.Error("lease, hint or flags change the geometry")
	}
}

// TestSlotPositionsWithArenas: the writer's walks over slot words skip the
// arenas between them (no region has arenas yet, so a header made here
// stands for one that will).
func TestSlotPositionsWithArenas(t *testing.T) {
	t.Parallel()
	tab := &Table{hdr: Header{Version: LayoutVersion, Buckets: 4, BucketBytes: 3 * BucketSize, InlineMax: 16}}
	var got []uint64
	for pos := range tab.slotWords() {
		got = append(got, pos)
	}
	if len(got) != 4*SlotsPerBucket {
		t.Fatalf("%d slot words, want %d", len(got), 4*SlotsPerBucket)
	}
	for i, pos := range got {
		b, s := uint32(i/SlotsPerBucket), i%SlotsPerBucket
		if want := HeaderSize + uint64(b)*3*BucketSize + uint64(s)*SlotSize; pos != want || tab.hdr.SlotOffset(b, s) != want {
			t.Fatalf("slot %d of bucket %d at %d (SlotOffset %d), want %d", s, b, pos, tab.hdr.SlotOffset(b, s), want)
		}
		if gb, gs := tab.hdr.slotIndex(pos); gb != b || gs != s {
			t.Fatalf("slotIndex(%d) = %d, %d; want %d, %d", pos, gb, gs, b, s)
		}
	}
}
