package backup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

type rec struct {
	key, value string
	version    uint64
}

func encode(t testing.TB, index uint64, recs []rec) []byte {
	t.Helper()
	return encodeHeader(t, Header{Index: index, Keys: uint64(len(recs)), Cluster: 0xc1}, recs)
}

func encodeHeader(t testing.TB, h Header, recs []rec) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := NewWriter(&b, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Add([]byte(r.key), []byte(r.value), r.version); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decode(b []byte) (Header, []rec, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return Header{}, nil, err
	}
	var out []rec
	for {
		x, err := r.Next()
		if errors.Is(err, io.EOF) {
			return r.Header(), out, nil
		}
		if err != nil {
			return r.Header(), out, err
		}
		out = append(out, rec{string(x.Key), string(x.Value), x.Version})
	}
}

func sample() []rec {
	var recs []rec
	for i := range 50 {
		recs = append(recs, rec{fmt.Sprintf("k%03d", i), string(bytes.Repeat([]byte{byte(i)}, i*7)), uint64(3 + i)})
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
		if h != (Header{Index: 100, Keys: uint64(len(recs)), Cluster: 0xc1}) || fmt.Sprint(got) != fmt.Sprint(recs) {
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
	b := encode(t, 10, []rec{{"a", "hello", 2}})
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
		"unordered":       {[]rec{{"b", "", 1}, {"a", "", 1}}, 2},
		"duplicate":       {[]rec{{"a", "", 1}, {"a", "", 1}}, 2},
		"version 0":       {[]rec{{"a", "", 0}}, 1},
		"version > idx":   {[]rec{{"a", "", 11}}, 1},
		"empty key":       {[]rec{{"", "", 1}}, 1},
		"too many":        {[]rec{{"a", "", 1}, {"b", "", 1}}, 1},
		"too few (Close)": {[]rec{{"a", "", 1}}, 2},
	} {
		var b bytes.Buffer
		w, _ := NewWriter(&b, Header{Index: 10, Keys: tc.keys})
		var err error
		for _, r := range tc.recs {
			if err = w.Add([]byte(r.key), []byte(r.value), r.version); err != nil {
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
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, recs, err := decode(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrChecksum) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if again := encodeHeader(t, h, recs); !bytes.Equal(again, b) {
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
