package table

import (
	"encoding/binary"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
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

func TestDocHeaderFields(t *testing.T) {
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
	}
	checkFields(t, docRows(docSection(t, "Header")), want, HeaderSize)
}

func TestDocRecordFields(t *testing.T) {
	want := map[string]field{
		"crc":      {recCRC, 4},
		"state":    {recState, 4},
		"version":  {recVersion, 8},
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
		w, ok := want[r[2]]
		if !ok {
			t.Errorf("doc field %q is unknown to the code", r[2])
			continue
		}
		delete(want, r[2])
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
	want := map[string][2]int{
		"record offset": {0, slotOffBits - 1},
		"record length": {slotOffBits, slotOffBits + slotLenBits - 1},
		"fingerprint":   {slotOffBits + slotLenBits, 63},
	}
	for _, r := range docRows(docSection(t, "Slots")) {
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
		{"a bucket is " + strconv.Itoa(SlotsPerBucket) + " slots of " + strconv.Itoa(SlotSize) + " B", true},
		{"A bucket is " + strconv.Itoa(BucketSize) + " bytes", true},
		{"| keyLen | 1..1024 |", MaxKey == 1024},
		{"| valueLen | 0..1 MiB |", MaxValue == 1<<20},
		{"first 32 GiB", MaxArea == 32<<30},
		{"records up to 8 MiB", (1<<slotLenBits)*RecordAlign == 8<<20},
		{"padding to a multiple of 8", RecordAlign == 8},
		{"xxHash64 (seed 0)", Hash(nil) == 0xef46db3751d8e999},
		{"CRC-32C (Castagnoli) of bytes 8..len", recVersion == 8},
		{"| slotsPerBucket | 8 |", SlotsPerBucket == 8},
		{"| flags | bit 0: incomplete; bits 1-15: a count of its changes", flagIncomplete == 1 && flagEpochShift == 1},
		{"| nbuckets | power of two, 2 to 2^28 |", MaxBuckets == 1<<28},
		{"at least recordBase + 32", MinRecord == 32},
		{"= 64 + nbuckets*64", BucketOffset(0) == 64 && BucketSize == 64},
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
	tab, mem, _ := newTable(t, 1<<20, Config{BytesPerSlot: 256})
	h, err := ParseHeader(mem)
	if err != nil {
		t.Fatal(err)
	}
	if h != tab.Header() {
		t.Fatalf("parsed %+v, table says %+v", h, tab.Header())
	}
	want := Header{
		Buckets:     1 << 20 / (8 * 256),
		GraceMillis: 1000,
		RecordBase:  HeaderSize + 64*(1<<20/(8*256)),
		RecordEnd:   1 << 20,
		Generation:  h.Generation,
	}
	if h != want || h.Generation == 0 || h.Grace() != DefaultGrace {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	if string(mem[:8]) != Magic || binary.LittleEndian.Uint32(mem[8:]) != LayoutVersion {
		t.Fatalf("magic/version bytes % x", mem[:12])
	}
}

func TestParseHeaderErrors(t *testing.T) {
	_, mem, _ := newTable(t, 1<<16, Config{Buckets: 64})
	good := append([]byte(nil), mem[:HeaderSize]...)
	le := binary.LittleEndian
	tests := []struct {
		name   string
		mutate func(b []byte) []byte
		want   error
	}{
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
		{"base moved", func(b []byte) []byte { le.PutUint64(b[offRecordBase:], 64+64*64+8); return b }, ErrBadHeader},
		{"end unaligned", func(b []byte) []byte { le.PutUint64(b[offRecordEnd:], 1<<16-4); return b }, ErrBadHeader},
		{"end below base", func(b []byte) []byte { le.PutUint64(b[offRecordEnd:], 64); return b }, ErrBadHeader},
		{"end leaves no record", func(b []byte) []byte { le.PutUint64(b[offRecordEnd:], 64+64*64+24); return b }, ErrBadHeader},
		{"end past 32 GiB", func(b []byte) []byte { le.PutUint64(b[offRecordEnd:], MaxArea+8); return b }, ErrBadHeader},
		{"generation 0", func(b []byte) []byte { le.PutUint64(b[offGeneration:], 0); return b }, ErrBadHeader},
		{"lease and hint are free", func(b []byte) []byte {
			le.PutUint64(b[offLease:], ^uint64(0))
			le.PutUint64(b[offLeaderHint:], 7)
			return b
		}, nil},
	}
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

func TestHeaderInArea(t *testing.T) {
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
