package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

func TestScanResponseRoundTrip(t *testing.T) {
	r := ScanResponse{Flags: ScanMore, Count: 2, Next: []byte("b\x00"), KVs: []ScanKV{
		{Key: []byte("a"), Meta: revision.Meta{Mod: 3}, Value: []byte("1")},
		{Key: []byte("b"), Meta: revision.Meta{Mod: 9}, Value: []byte{}},
	}}
	var got ScanResponse
	if err := DecodeScanResponse(AppendScanResponse(nil, &r), &got); err != nil {
		t.Fatal(err)
	}
	if got.Flags != r.Flags || got.Count != r.Count || !bytes.Equal(got.Next, r.Next) || len(got.KVs) != 2 ||
		!bytes.Equal(got.KVs[1].Key, []byte("b")) || got.KVs[1].Meta.Mod != 9 || !bytes.Equal(got.KVs[0].Value, []byte("1")) {
		t.Fatalf("got %+v want %+v", got, r)
	}
}

func TestScanDecodeMalformed(t *testing.T) {
	resp := AppendScanResponse(nil, &ScanResponse{Count: 1, KVs: []ScanKV{{Key: []byte("k"), Meta: revision.Meta{Mod: 1}, Value: []byte("v")}}})
	mut := func(b []byte, f func(b []byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"response empty", nil},
		{"response truncated", resp[:len(resp)-1]},
		{"response trailing", append(append([]byte(nil), resp...), 0)},
		{"response unknown flag", mut(resp, func(b []byte) []byte { b[0] = 0x40; return b })},
		{"response huge entry count", mut(resp, func(b []byte) []byte { b[11], b[12], b[13], b[14] = 0xff, 0xff, 0xff, 0xff; return b })},
		{"response huge value length", mut(resp, func(b []byte) []byte { b[25] = 0xff; return b })},
	} {
		var r ScanResponse
		if err := DecodeScanResponse(tc.b, &r); !errors.Is(err, ErrScan) {
			t.Errorf("%s: got %v, want ErrScan", tc.name, err)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{nil, nil},
		{[]byte("a"), []byte("b")},
		{[]byte("ab"), []byte("ac")},
		{[]byte{'a', 0xff}, []byte("b")},
		{[]byte{'a', 0xfe, 0xff, 0xff}, []byte{'a', 0xff}},
		{[]byte{0xff}, nil},
		{[]byte{0xff, 0xff}, nil},
		{[]byte{0}, []byte{1}},
	} {
		if got := PrefixEnd(tc.in); !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", tc.in, got, tc.want)
		}
	}
}

func FuzzDecodeScanResponse(f *testing.F) {
	f.Add(AppendScanResponse(nil, &ScanResponse{Flags: ScanMore, Count: 1, Next: []byte("b"),
		KVs: []ScanKV{{Key: []byte("a"), Meta: revision.Meta{Mod: 1}, Value: []byte("v")}}}))
	f.Add(AppendScanResponse(nil, &ScanResponse{}))
	f.Fuzz(func(t *testing.T, in []byte) {
		var r ScanResponse
		if err := DecodeScanResponse(in, &r); err != nil {
			if !errors.Is(err, ErrScan) {
				t.Fatalf("error %v does not wrap ErrScan", err)
			}
			return
		}
		if out := AppendScanResponse(nil, &r); !bytes.Equal(out, in) {
			t.Fatalf("re-encode differs:\n%x\n%x", out, in)
		}
	})
}

// TestScanMeta: a page's metadata round-trips; without it the encoding is
// that of a kvd before revisions.
func TestScanMeta(t *testing.T) {
	m := revision.Meta{Create: 2, Mod: 5, Version: 3, Lease: 7}
	r := ScanResponse{Flags: ScanHasMeta, Count: 1, KVs: []ScanKV{{Key: []byte("k"), Meta: m, Value: []byte("v")}}}
	var got ScanResponse
	if err := DecodeScanResponse(AppendScanResponse(nil, &r), &got); err != nil || got.KVs[0].Meta != m {
		t.Fatalf("response: %+v, %v", got, err)
	}
	r.Flags = 0
	if err := DecodeScanResponse(AppendScanResponse(nil, &r), &got); err != nil || got.KVs[0].Meta != (revision.Meta{Mod: 5}) {
		t.Fatalf("response without metadata: %+v, %v", got, err)
	}
}

// TestScanCurrentRevision: a page with ScanHasCurrent ends with the
// store's current revision, after the entries' metadata; one without it
// carries none, and a truncated one is refused.
func TestScanCurrentRevision(t *testing.T) {
	m := revision.Meta{Create: 2, Mod: 5, Version: 3, Lease: 7}
	for _, flags := range []uint8{ScanHasCurrent, ScanHasCurrent | ScanHasMeta | ScanMore} {
		r := ScanResponse{Flags: flags, Count: 1, Next: []byte("l"), KVs: []ScanKV{{Key: []byte("k"), Meta: m, Value: []byte("v")}}, Current: 42}
		b := AppendScanResponse(nil, &r)
		var got ScanResponse
		if err := DecodeScanResponse(b, &got); err != nil || got.Current != 42 || got.KVs[0].Meta.Mod != 5 {
			t.Fatalf("flags %#x: %+v, %v", flags, got, err)
		}
		if err := DecodeScanResponse(b[:len(b)-1], &got); !errors.Is(err, ErrScan) {
			t.Errorf("flags %#x, truncated: %v, want ErrScan", flags, err)
		}
	}
	r := ScanResponse{Count: 0, Current: 42}
	var got ScanResponse
	if err := DecodeScanResponse(AppendScanResponse(nil, &r), &got); err != nil || got.Current != 0 {
		t.Fatalf("without ScanHasCurrent: %+v, %v", got, err)
	}
}
