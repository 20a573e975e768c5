package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

func TestScanRequestRoundTrip(t *testing.T) {
	for _, r := range []ScanRequest{
		{},
		{Flags: ScanKeysOnly, Limit: 7, Start: []byte("a"), End: []byte("b")},
		{Flags: ScanCountOnly, Start: []byte{0xff, 0}, End: nil},
	} {
		var got ScanRequest
		if err := DecodeScanRequest(AppendScanRequest(nil, &r), &got); err != nil {
			t.Fatal(err)
		}
		if got.Flags != r.Flags || got.Limit != r.Limit || !bytes.Equal(got.Start, r.Start) || !bytes.Equal(got.End, r.End) {
			t.Fatalf("got %+v want %+v", got, r)
		}
	}
}

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
	req := AppendScanRequest(nil, &ScanRequest{Limit: 1, Start: []byte("a"), End: []byte("z")})
	resp := AppendScanResponse(nil, &ScanResponse{Count: 1, KVs: []ScanKV{{Key: []byte("k"), Meta: revision.Meta{Mod: 1}, Value: []byte("v")}}})
	mut := func(b []byte, f func(b []byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	for _, tc := range []struct {
		name string
		b    []byte
		resp bool
	}{
		{"request empty", nil, false},
		{"request truncated", req[:len(req)-1], false},
		{"request trailing", append(append([]byte(nil), req...), 0), false},
		{"request unknown flag", mut(req, func(b []byte) []byte { b[0] = 0x80; return b }), false},
		{"request start past the end", mut(req, func(b []byte) []byte { b[5] = 0xff; return b }), false},
		{"response empty", nil, true},
		{"response truncated", resp[:len(resp)-1], true},
		{"response trailing", append(append([]byte(nil), resp...), 0), true},
		{"response unknown flag", mut(resp, func(b []byte) []byte { b[0] = 0x40; return b }), true},
		{"response more without next", mut(resp, func(b []byte) []byte { b[0] = ScanMore; return b }), true},
		{"response huge entry count", mut(resp, func(b []byte) []byte { b[11], b[12], b[13], b[14] = 0xff, 0xff, 0xff, 0xff; return b }), true},
		{"response huge value length", mut(resp, func(b []byte) []byte { b[25] = 0xff; return b }), true},
	} {
		var err error
		if tc.resp {
			var r ScanResponse
			err = DecodeScanResponse(tc.b, &r)
		} else {
			var r ScanRequest
			err = DecodeScanRequest(tc.b, &r)
		}
		if !errors.Is(err, ErrScan) {
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

func FuzzDecodeScanRequest(f *testing.F) {
	f.Add(AppendScanRequest(nil, &ScanRequest{Flags: ScanKeysOnly, Limit: 3, Start: []byte("a"), End: []byte("b")}))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		var r ScanRequest
		if err := DecodeScanRequest(in, &r); err != nil {
			if !errors.Is(err, ErrScan) {
				t.Fatalf("error %v does not wrap ErrScan", err)
			}
			return
		}
		if out := AppendScanRequest(nil, &r); !bytes.Equal(out, in) {
			t.Fatalf("re-encode differs:\n%x\n%x", out, in)
		}
	})
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

// TestScanMetaAndRevision: a request's revision and a page's metadata
// round-trip; without them the encodings are those of a kvd before
// revisions, and a revision of 0 sent explicitly is refused.
func TestScanMetaAndRevision(t *testing.T) {
	q := ScanRequest{Flags: ScanMeta, Limit: 3, Start: []byte("a"), Rev: 42}
	var gq ScanRequest
	if err := DecodeScanRequest(AppendScanRequest(nil, &q), &gq); err != nil || gq.Rev != 42 || gq.Flags != ScanMeta {
		t.Fatalf("request: %+v, %v", gq, err)
	}
	old := AppendScanRequest(nil, &ScanRequest{Limit: 3})
	if len(old) != 1+4+2+2 {
		t.Fatalf("a request without a revision is %d bytes, want the older 9", len(old))
	}
	if err := DecodeScanRequest(append(old, make([]byte, 8)...), &gq); !errors.Is(err, ErrScan) {
		t.Fatalf("explicit revision 0: %v, want ErrScan", err)
	}
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
