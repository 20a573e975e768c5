package backup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
)

// rec is a record; its lease is file.attach's.
type rec struct {
	key, value string
	m          revision.Meta
}

// v is the Meta of a key written once, at rev.
func v(rev uint64) revision.Meta { return revision.Meta{Create: rev, Mod: rev, Version: 1} }

func encode(t testing.TB, index uint64, recs []rec) []byte {
	t.Helper()
	return encodeHeader(t, Header{Index: index, Keys: uint64(len(recs)), Cluster: 0xc1, Revision: index}, recs)
}

func encodeHeader(t testing.TB, h Header, recs []rec) []byte {
	t.Helper()
	return encodeFile(t, file{h: h, recs: recs})
}

// file is a backup's content: header, leases, records and which lease
// each record's key is attached to.
type file struct {
	h      Header
	leases []Lease
	recs   []rec
	attach map[string]uint64
}

func encodeFile(t testing.TB, f file) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := NewWriter(&b, f.h)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range f.leases {
		if err := w.AddLease(l); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range f.recs {
		m := r.m
		m.Lease = f.attach[r.key]
		if err := w.Add([]byte(r.key), []byte(r.value), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decode(b []byte) (Header, []rec, error) {
	f, err := decodeFile(b)
	return f.h, f.recs, err
}

func decodeFile(b []byte) (file, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return file{}, err
	}
	f := file{h: r.Header(), leases: r.Leases(), attach: map[string]uint64{}}
	for {
		x, err := r.Next()
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil {
			return f, err
		}
		m := x.Meta
		m.Lease = 0
		f.recs = append(f.recs, rec{string(x.Key), string(x.Value), m})
		if x.Meta.Lease != 0 {
			f.attach[string(x.Key)] = x.Meta.Lease
		}
	}
}

func sample() []rec {
	var recs []rec
	for i := range 50 {
		recs = append(recs, rec{fmt.Sprintf("k%03d", i), string(bytes.Repeat([]byte{byte(i)}, i*7)), v(uint64(3 + i))})
	}
	return recs
}

func TestRoundTrip(t *testing.T) {
	for _, recs := range [][]rec{nil, sample()} {
		b := encode(t, 100, recs)
		h, got, err := decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if h != (Header{Index: 100, Keys: uint64(len(recs)), Cluster: 0xc1, Revision: 100, Format: Format}) || fmt.Sprint(got) != fmt.Sprint(recs) {
			t.Fatalf("decoded %+v %v, want %d records %v", h, got, len(recs), recs)
		}
		if _, sum, err := Verify(bytes.NewReader(b)); err != nil || len(sum) != TrailerLen {
			t.Fatalf("Verify: %x, %v", sum, err)
		}
	}
}

// TestEveryDamageRefused flips each byte of a small backup in turn, and
// truncates it at every length: no variant may decode as whole.
func TestEveryDamageRefused(t *testing.T) {
	b := encode(t, 100, sample()[:5])
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 0x20
		_, _, err := Verify(bytes.NewReader(d))
		if !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTruncated) {
			t.Fatalf("byte %d flipped: Verify = %v, want a refusal", i, err)
		}
	}
	for n := range len(b) {
		_, _, err := Verify(bytes.NewReader(b[:n]))
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("truncated to %d of %d bytes: Verify = %v, want ErrTruncated", n, len(b), err)
		}
	}
	if _, _, err := Verify(bytes.NewReader(append(bytes.Clone(b), 0))); !errors.Is(err, ErrFormat) {
		t.Fatalf("a byte after the trailer: Verify = %v, want ErrFormat", err)
	}
}

// TestFlippedValueIsChecksumError: damage that keeps the structure intact
// (a value byte) is caught by the checksum alone.
func TestFlippedValueIsChecksumError(t *testing.T) {
	b := encode(t, 10, []rec{{"a", "hello", v(2)}})
	b[HeaderLen+recordHead+1] ^= 1 // the value's first byte
	if _, _, err := Verify(bytes.NewReader(b)); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Verify = %v, want ErrChecksum", err)
	}
}

func TestWriterRefusesBadRecords(t *testing.T) {
	for name, tc := range map[string]struct {
		recs []rec
		keys uint64
	}{
		"unordered":       {[]rec{{"b", "", v(1)}, {"a", "", v(1)}}, 2},
		"duplicate":       {[]rec{{"a", "", v(1)}, {"a", "", v(1)}}, 2},
		"mod 0":           {[]rec{{"a", "", revision.Meta{Version: 1}}}, 1},
		"mod > revision":  {[]rec{{"a", "", v(11)}}, 1},
		"create 0":        {[]rec{{"a", "", revision.Meta{Mod: 3, Version: 1}}}, 1},
		"create > mod":    {[]rec{{"a", "", revision.Meta{Create: 4, Mod: 3, Version: 1}}}, 1},
		"version 0":       {[]rec{{"a", "", revision.Meta{Create: 3, Mod: 3}}}, 1},
		"version > revs":  {[]rec{{"a", "", revision.Meta{Create: 3, Mod: 5, Version: 4}}}, 1},
		"empty key":       {[]rec{{"", "", v(1)}}, 1},
		"too many":        {[]rec{{"a", "", v(1)}, {"b", "", v(1)}}, 1},
		"too few (Close)": {[]rec{{"a", "", v(1)}}, 2},
	} {
		var b bytes.Buffer
		w, _ := NewWriter(&b, Header{Index: 10, Keys: tc.keys, Revision: 10})
		var err error
		for _, r := range tc.recs {
			if err = w.Add([]byte(r.key), []byte(r.value), r.m); err != nil {
				break
			}
		}
		if err == nil {
			err = w.Close()
		}
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err = %v, want ErrFormat", name, err)
		}
	}
}

func TestNotABackup(t *testing.T) {
	_, _, err := Verify(bytes.NewReader(bytes.Repeat([]byte("x"), 100)))
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("Verify = %v, want ErrFormat", err)
	}
}

// FuzzReader: any input either decodes to records the writer re-encodes
// to the same bytes, or fails with one of the package's errors; it never
// panics or allocates beyond the record bound.
func FuzzReader(f *testing.F) {
	f.Add(encode(f, 100, sample()[:3]))
	f.Add(encode(f, 1, nil))
	f.Add(encodeFile(f, leased()))
	f.Add(readFixture(f))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeFile(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrChecksum) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		again := encodeFile(t, got)
		if got.h.Format != Format {
			// Written again in the current format: the same content.
			back, err := decodeFile(again)
			back.h.Format = got.h.Format
			if err != nil || fmt.Sprint(back) != fmt.Sprint(got) {
				t.Fatalf("format %d backup re-encodes to %+v, %v; want %+v", got.h.Format, back, err, got)
			}
			return
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decoded backup re-encodes differently")
		}
	})
}

// TestIndexBounded: a backup's index is at most MaxIndex. A well-formed
// file (checksum and all) at a larger one was restored, and the cluster
// then never worked: one node's log wrapped (a storage failure at every
// start), several elected no leader (peers refuse indexes past 2^62).
func TestIndexBounded(t *testing.T) {
	for _, tc := range []struct {
		index uint64
		ok    bool
	}{{1, true}, {MaxIndex, true}, {MaxIndex + 1, false}, {1<<64 - 1, false}} {
		var buf bytes.Buffer
		_, werr := NewWriter(&buf, Header{Index: tc.index})
		if (werr == nil) != tc.ok || (werr != nil && !errors.Is(werr, ErrFormat)) {
			t.Errorf("index %d: NewWriter = %v, want ok=%v", tc.index, werr, tc.ok)
		}
		// The same header written by hand, as a hostile file would be.
		b := appendHeader(nil, Header{Index: tc.index})
		_, rerr := NewReader(bytes.NewReader(b))
		if (rerr == nil) != tc.ok || (rerr != nil && !errors.Is(rerr, ErrFormat)) {
			t.Errorf("index %d: NewReader = %v, want ok=%v", tc.index, rerr, tc.ok)
		}
	}
}

// leased is a backup with leases: two keys on lease 7, one on lease 9, one
// key on none, and lease 12 with no keys.
func leased() file {
	recs := []rec{{"a", "1", v(3)}, {"svc/a", "addr-a", revision.Meta{Create: 2, Mod: 5, Version: 3}}, {"svc/b", "addr-b", v(6)}, {"svc/c", "addr-c", v(8)}}
	return file{
		h:      Header{Index: 20, Keys: uint64(len(recs)), Cluster: 0xc1, Leases: 3, Revision: 17, Compacted: 4, Format: Format},
		leases: []Lease{{ID: 7, TTL: limits.MinLeaseTTL}, {ID: 9, TTL: time.Minute}, {ID: 12, TTL: limits.MaxLeaseTTL}},
		recs:   recs,
		attach: map[string]uint64{"svc/a": 7, "svc/b": 9, "svc/c": 7},
	}
}

// TestLeasesRoundTrip: the leases and each key's lease come back as
// written, and a file with leases is checked as strictly as one without.
func TestLeasesRoundTrip(t *testing.T) {
	want := leased()
	b := encodeFile(t, want)
	got, err := decodeFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 0x20
		if _, _, err := Verify(bytes.NewReader(d)); err == nil {
			t.Fatalf("byte %d flipped: Verify accepted it", i)
		}
	}
	for n := range len(b) {
		if _, _, err := Verify(bytes.NewReader(b[:n])); !errors.Is(err, ErrTruncated) {
			t.Fatalf("truncated to %d of %d bytes: Verify = %v, want ErrTruncated", n, len(b), err)
		}
	}
}

// readFixture is a backup written by kvd before backups carried leases
// (format 1): index 10, cluster 0xc1, keys a=1 (version 3), b="" (4),
// svc/x=addr (7).
func readFixture(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/format1.kvdsnap")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadsFormatWithoutLeases: a backup in the format before leases
// still reads, as a backup without leases.
func TestReadsFormatWithoutLeases(t *testing.T) {
	got, err := decodeFile(readFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	want := file{h: Header{Index: 10, Keys: 3, Cluster: 0xc1, Revision: 10, Format: FormatNoLeases}, leases: []Lease{},
		recs: []rec{{"a", "1", v(3)}, {"b", "", v(4)}, {"svc/x", "addr", v(7)}}, attach: map[string]uint64{}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	if _, sum, err := Verify(bytes.NewReader(readFixture(t))); err != nil || len(sum) != TrailerLen {
		t.Fatalf("Verify: %x, %v", sum, err)
	}
}

// TestNewerFormatRefused: a reader refuses a format it does not know by
// its version, as the readers of formats 1 and 2 refuse this package's
// files (they accepted exactly the versions they knew).
func TestNewerFormatRefused(t *testing.T) {
	b := encodeFile(t, leased())
	if v := binary.LittleEndian.Uint16(b[8:]); v <= FormatNoRevisions {
		t.Fatalf("a backup with revisions is written as format %d, which older readers would misread", v)
	}
	binary.LittleEndian.PutUint16(b[8:], Format+1)
	_, _, err := Verify(bytes.NewReader(b))
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), fmt.Sprintf("format version %d", Format+1)) {
		t.Fatalf("Verify = %v, want ErrFormat naming version %d", err, Format+1)
	}
}

// TestBadLeasesRefused: the writer refuses leases and attachments the
// reader would refuse.
func TestBadLeasesRefused(t *testing.T) {
	ok := Lease{ID: 7, TTL: limits.MinLeaseTTL}
	for name, tc := range map[string]struct {
		leases []Lease
		n      uint64 // the header's lease count
		lease  uint64 // of record "a"
	}{
		"id 0":          {[]Lease{{ID: 0, TTL: time.Minute}}, 1, 0},
		"unordered":     {[]Lease{{ID: 9, TTL: time.Minute}, ok}, 2, 0},
		"duplicate":     {[]Lease{ok, ok}, 2, 0},
		"ttl too short": {[]Lease{{ID: 7, TTL: limits.MinLeaseTTL - 1}}, 1, 0},
		"ttl too long":  {[]Lease{{ID: 7, TTL: limits.MaxLeaseTTL + 1}}, 1, 0},
		"too many":      {[]Lease{ok}, 0, 0},
		"too few":       {nil, 1, 0},
		"unknown lease": {[]Lease{ok}, 1, 8},
	} {
		var b bytes.Buffer
		w, err := NewWriter(&b, Header{Index: 10, Keys: 1, Leases: tc.n, Revision: 10})
		for _, l := range tc.leases {
			if err == nil {
				err = w.AddLease(l)
			}
		}
		if err == nil {
			err = w.Add([]byte("a"), nil, revision.Meta{Create: 1, Mod: 1, Version: 1, Lease: tc.lease})
		}
		if err == nil {
			err = w.Close()
		}
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err = %v, want ErrFormat", name, err)
		}
	}
	if _, err := NewWriter(io.Discard, Header{Index: 10, Leases: limits.MaxLeases + 1}); !errors.Is(err, ErrFormat) {
		t.Errorf("more leases than may exist: NewWriter = %v, want ErrFormat", err)
	}
}

// TestLeaseKeysBounded: no lease holds more keys than one may.
func TestLeaseKeysBounded(t *testing.T) {
	w, err := NewWriter(io.Discard, Header{Index: 10, Keys: limits.MaxLeaseKeys + 1, Leases: 1, Revision: 10})
	if err == nil {
		err = w.AddLease(Lease{ID: 7, TTL: time.Minute})
	}
	for i := range limits.MaxLeaseKeys + 1 {
		if err != nil {
			break
		}
		err = w.Add(fmt.Appendf(nil, "k%05d", i), nil, revision.Meta{Create: 1, Mod: 1, Version: 1, Lease: 7})
	}
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("lease with %d keys: err = %v, want ErrFormat", limits.MaxLeaseKeys+1, err)
	}
}

// TestReadsFormatWithoutRevisions: a backup of format 2, saved by kvd
// before backups carried revisions (testdata/format2.kvdsnap: see
// internal/store/testdata/README.md), still reads: each key created and
// last modified at its version, once, with its lease; the revision is the
// backup's index, so a restored cluster's revisions stay above every
// restored one.
func TestReadsFormatWithoutRevisions(t *testing.T) {
	b, err := os.ReadFile("testdata/format2.kvdsnap")
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeFile(b)
	if err != nil {
		t.Fatal(err)
	}
	const lease = 8080258718234143399
	want := file{h: Header{Index: 7, Keys: 3, Cluster: 0x3a1c797fde096ad9, Leases: 1, Revision: 7, Format: FormatNoRevisions},
		leases: []Lease{{ID: lease, TTL: time.Hour}},
		recs:   []rec{{"alpha", "one", v(3)}, {"beta", "two-again", v(5)}, {"svc/node1", "10.0.0.1", v(7)}},
		attach: map[string]uint64{"svc/node1": lease}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

// TestMetaAndRevisionsRoundTrip: format 3 carries each key's whole Meta
// (create, mod, version, lease) and the header the store and compaction
// revisions, exactly.
func TestMetaAndRevisionsRoundTrip(t *testing.T) {
	want := leased()
	r, err := NewReader(bytes.NewReader(encodeFile(t, want)))
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); h.Format != Format || h.Revision != 17 || h.Compacted != 4 {
		t.Fatalf("header %+v; want format %d, revision 17, compacted 4", h, Format)
	}
	var got []revision.Meta
	for {
		x, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, x.Meta)
	}
	for i, rc := range want.recs {
		m := rc.m
		m.Lease = want.attach[rc.key]
		if i >= len(got) || got[i] != m {
			t.Fatalf("records' Meta %+v; record %d want %+v", got, i, m)
		}
	}
}

// TestHeaderRevisionsChecked: a header's revision is bounded as its index
// is, and nothing is compacted past it.
func TestHeaderRevisionsChecked(t *testing.T) {
	for _, h := range []Header{{Index: 10, Revision: MaxIndex + 1}, {Index: 10, Revision: 5, Compacted: 6}} {
		if _, err := NewWriter(io.Discard, h); !errors.Is(err, ErrFormat) {
			t.Errorf("%+v: NewWriter = %v, want ErrFormat", h, err)
		}
		if _, err := NewReader(bytes.NewReader(appendHeader(nil, h))); !errors.Is(err, ErrFormat) {
			t.Errorf("%+v: NewReader = %v, want ErrFormat", h, err)
		}
	}
}
